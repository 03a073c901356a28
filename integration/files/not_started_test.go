package files

import (
	"errors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// What the runtime could not start is a typed error on every driver, never an exit code with
// the runtime's words as output; what a program that ran answered, 126 and 127 included,
// stays its result (issue 29, item 1).
func TestExecTheRuntimeCouldNotStart(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	ctx := itest.Context(t)
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
			if code := messages.EncodeError(err).Code; code != messages.CodeProcessNotStarted {
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
