package files

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// What the runtime could not start answers as docker exec answers it, on every driver: exit
// 127 (no program) or 126 (any other cause), the runtime's words on stderr and never on
// stdout, and the cause typed in the result; what a program that ran answered, 126 and 127
// included, stays its result with no cause.
func TestExecTheRuntimeCouldNotStart(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	ctx := itest.Context(t)
	for _, tc := range []struct {
		name string
		cmd  sandbox.Command
		wd   string
		want sandbox.StartFailure
		code int
	}{
		{"missing working directory", sandbox.Argv("echo", "ok"), "no/such/dir", sandbox.StartWorkDir, 126},
		{"missing program", sandbox.Argv("no-such-program"), ".", sandbox.StartNoProgram, 127},
		{"missing program by path", sandbox.Argv("/no/such/program"), ".", sandbox.StartNoProgram, 127},
		{"not executable", sandbox.Argv("/etc/passwd"), ".", sandbox.StartPermission, 126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Exec(ctx, tc.cmd, tc.wd, time.Minute)
			if err != nil || res.NotStarted != tc.want || res.ExitCode != tc.code {
				t.Fatalf("exec = %+v, %v; want the result %d, not started (%s)", res, err, tc.code, tc.want)
			}
			if len(res.StdoutBytes) != 0 || !strings.HasSuffix(res.Stderr(), "\n") || strings.Count(res.Stderr(), "\n") != 1 {
				t.Fatalf("stdout %q, stderr %q; want the runtime's words as one line of stderr, nothing on stdout", res.StdoutBytes, res.StderrBytes)
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
			if err != nil || res.ExitCode != tc.code || res.NotStarted != "" {
				t.Fatalf("exec = %+v, %v; want the program's result %d", res, err, tc.code)
			}
		})
	}
	// The sandbox is unharmed: nothing was discarded.
	if res, err := sb.Exec(ctx, sandbox.Argv("echo", "ok"), ".", time.Minute); err != nil || res.Stdout() != "ok\n" {
		t.Fatalf("exec after = %+v, %v", res, err)
	}
}
