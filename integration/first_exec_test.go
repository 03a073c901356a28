package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// A cold acquire hands out its storage base on every file plane and egress mode: the very
// first call, an exec in ".", runs there. An allowlisted (gated) workload on the host plane
// was once handed out before its base existed, and the first exec answered runc's chdir
// failure as exit 126 (issue 29, item 1).
func TestFirstExecRunsInTheBase(t *testing.T) {
	image := dockertest.Busybox(t) // it has no /maf-sandbox/work: every acquire makes the base
	egress := []struct {
		name string
		spec func(t *testing.T) sandbox.Spec
	}{
		{"closed", func(t *testing.T) sandbox.Spec { return busyboxSpec(t) }},
		{"allowlist", func(t *testing.T) sandbox.Spec { return allowlistSpec(t, image, "first-exec.maf-e2e.example") }},
	}
	for _, p := range filePlanes(t) {
		for _, e := range egress {
			t.Run(string(p)+"_"+e.name, func(t *testing.T) {
				b := egressBackend(t, "", actors.WithFilePlane(p))
				sb := acquire(t, b, newKey(t), e.spec(t))
				res, err := sb.Exec(ctxT(t), sandbox.Argv("echo", "ok"), ".", time.Minute)
				if err != nil {
					t.Fatalf("first exec: %v", err)
				}
				if res.ExitCode != 0 || res.Stdout() != "ok\n" {
					t.Fatalf("first exec = %d %q %q, want 0 \"ok\\n\"", res.ExitCode, res.Stdout(), res.Stderr())
				}
				res, err = sb.Exec(ctxT(t), sandbox.Argv("pwd"), ".", time.Minute)
				if err != nil || res.Stdout() != actors.DefaultWorkDir+"\n" {
					t.Fatalf("pwd = %q, %v", res.Stdout(), err)
				}
			})
		}
	}
}

// What the runtime could not start is a typed error on every driver, never an exit code with
// the runtime's words as output; what a program that ran answered, 126 and 127 included,
// stays its result (issue 29, item 1).
func TestExecTheRuntimeCouldNotStart(t *testing.T) {
	b := newBackend(t)
	sb := acquire(t, b, newKey(t), busyboxSpec(t))
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		cmd  sandbox.Command
		wd   string
		want sandbox.StartFailure
	}{
		{"missing working directory", sandbox.Argv("echo", "ok"), "no/such/dir", sandbox.StartWorkDir},
		{"missing program", sandbox.Argv("no-such-program"), ".", sandbox.StartNoProgram},
		{"missing program by path", sandbox.Argv("/no/such/program"), ".", sandbox.StartNoProgram},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Exec(ctx, tc.cmd, tc.wd, time.Minute)
			var ns *sandbox.ProcessNotStartedError
			if !errors.As(err, &ns) || ns.Cause != tc.want || !errors.Is(err, sandbox.ErrOS) {
				t.Fatalf("exec = %+v, %v; want a ProcessNotStartedError (%s)", res, err, tc.want)
			}
			if code := service.EncodeError(err).Code; code != service.CodeProcessNotStarted {
				t.Fatalf("wire code %s", code)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		shell string
		code  int
	}{
		{"exit 127", "exit 127", 127},
		{"exit 126", "exit 126", 126},
		{"sh's own not found", "no-such-program", 127},
	} {
		t.Run(tc.name+" stays a result", func(t *testing.T) {
			res, err := sb.Exec(ctx, sandbox.Shell(tc.shell), ".", time.Minute)
			if err != nil || res.ExitCode != tc.code {
				t.Fatalf("exec = %+v, %v; want the result %d", res, err, tc.code)
			}
		})
	}
	// The sandbox is unharmed: nothing was discarded.
	if res, err := sb.Exec(ctx, sandbox.Argv("echo", "ok"), ".", time.Minute); err != nil || res.Stdout() != "ok\n" {
		t.Fatalf("exec after = %+v, %v", res, err)
	}
}
