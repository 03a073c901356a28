package process

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestProcessOnANonRootImage: an image whose user is not root gets the supervisor and its
// socket (the engine made the socket's directory at create, that user's, mode 0700), so its
// processes are durable and run as that user.
func TestProcessOnANonRootImage(t *testing.T) {
	image := itest.DerivedImage(t, "mkdir -p /home/u && chown 1234:1234 /home/u", "USER 1234:1234")
	b := channelBackend(t)
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	if err != nil {
		t.Fatal(err)
	}
	sb := itest.Acquire(t, b, itest.NewKey(t), spec).(*actors.Sandbox)
	p := start(t, sb, sandbox.ProcessSpec{Command: sandbox.Shell("id -u; stat -c '%u %a' /.maf-sandbox-exec")})
	if !p.Durable || p.Transport != sandbox.TransportSupervisor {
		t.Fatalf("a process of a non-root image: %+v", p)
	}
	out, _, exit := readAll(t, sb, p.ID, 0, 1<<20)
	if string(out) != "1234\n1234 700\n" || exit.ExitCode != 0 {
		t.Fatalf("output %q, exit %+v", out, exit)
	}
}

// TestProcessOnDockerExec: a sandbox whose image runs an entrypoint of its own has no
// supervisor, so a process is a docker exec the engine follows: the start says so, its output
// and exit are read as a durable process's are, and what a docker exec cannot do is refused
// with a typed error before anything runs.
func TestProcessOnDockerExec(t *testing.T) {
	image := itest.DerivedImage(t, "true", `ENTRYPOINT ["/bin/sh", "-c", "exec \"$@\"", "entry"]`)
	b := channelBackend(t)
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	if err != nil {
		t.Fatal(err)
	}
	sb := itest.Acquire(t, b, itest.NewKey(t), spec).(*actors.Sandbox)
	p := start(t, sb, sandbox.ProcessSpec{ID: "de", Command: sandbox.Shell("echo out; echo err >&2; sleep 1; exit 3")})
	if p.Durable || p.Transport != sandbox.TransportDockerExec || !p.Created {
		t.Fatalf("start: %+v", p)
	}
	if again := start(t, sb, sandbox.ProcessSpec{ID: "de", Command: sandbox.Shell("echo out; echo err >&2; sleep 1; exit 3")}); again.Created {
		t.Fatalf("the retried start made another process: %+v", again)
	}
	if err := sb.SignalProcess(itest.Context(t), "de", sandbox.SIGTERM); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("a signal to a docker exec: %v", err)
	}
	out, cut, exit := readAll(t, sb, "de", 0, 1<<20)
	if cut != nil || exit.ExitCode != 3 || exit.Reason != sandbox.ExitExited || !strings.Contains(string(out), "out\n") || !strings.Contains(string(out), "err\n") {
		t.Fatalf("output %q, cut %v, exit %+v", out, cut, exit)
	}
	for _, s := range []sandbox.ProcessSpec{
		{Command: sandbox.Argv("cat"), Stdin: true},
		{Command: sandbox.Argv("sh"), Terminal: &sandbox.TerminalSize{Rows: 24, Cols: 80}},
		{Command: sandbox.Argv("sleep", "10"), Timeout: 1e9},
	} {
		if _, err := sb.StartProcess(itest.Context(t), s); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("%+v on docker exec: %v", s, err)
		}
	}
	if ps, err := sb.ListProcesses(itest.Context(t)); err != nil || len(ps) != 1 || ps[0].Exit == nil {
		t.Fatalf("list: %+v %v", ps, err)
	}
}
