package execchan

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// TestExecRefusesAnOverSizeCommandLine: a command line longer than one exec carries is an
// invalid argument that names the limit, refused before anything is sent, alike on the exec
// channel and on docker exec; the sandbox answers the next command.
func TestExecRefusesAnOverSizeCommandLine(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	for _, path := range []struct {
		name string
		opt  actors.Option
	}{
		{"exec channel", actors.WithExecChannel(itest.ExecSupervisor(t))},
		{"docker exec", actors.WithExecChannel(nil)},
	} {
		t.Run(path.name, func(t *testing.T) {
			b, eng := itest.NewCountingBackend(t, path.opt)
			sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
			for _, cmd := range []sandbox.Command{sandbox.Argv("echo", big), sandbox.Shell("echo " + big)} {
				eng.Reset()
				r, err := sb.Exec(itest.Context(t), cmd, "", time.Minute)
				var inv *sandbox.InvalidArgumentError
				if !errors.As(err, &inv) || !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), strconv.Itoa(execwire.MaxPayload)) {
					t.Fatalf("a 5 MiB command line: exit %d, %v; want an invalid argument naming the limit", r.ExitCode, err)
				}
				if slices.Contains(eng.Seen(), "exec") {
					t.Fatalf("the refused command went to docker exec (%v)", eng.Seen())
				}
			}
			if r := run(t, sb, sandbox.Argv("echo", "ok")); r.Stdout() != "ok\n" {
				t.Fatalf("the next command answered %q", r.Stdout())
			}
		})
	}
}
