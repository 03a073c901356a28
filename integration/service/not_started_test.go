package service

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestServiceExecInADirectoryThatIsNotThere runs the probe shape the public reference's
// conformance suite uses after a refused write outside the working directory: `test` in a
// sibling directory that does not exist, through the NATS API. It answers an ExecResult as
// the Docker backend spec's §11.1 says (exit 126, the runtime's words on stderr), with the
// cause typed in the reply; on both exec paths.
func TestServiceExecInADirectoryThatIsNotThere(t *testing.T) {
	for _, path := range []struct {
		name string
		opt  actors.Option
	}{
		{"exec channel", actors.WithExecChannel(itest.ExecSupervisor(t))},
		{"docker exec", actors.WithExecChannel(nil)},
	} {
		t.Run(path.name, func(t *testing.T) {
			b := itest.NewBackend(t, path.opt)
			srv := natstest.Run(t)
			itest.ServeBackend(t, srv, b)
			c, err := client.New(itest.Context(t), natstest.Connect(t, srv))
			if err != nil {
				t.Fatalf("new client: %v", err)
			}
			sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), itest.BusyboxSpec(t))
			probeASiblingThatIsNotThere(t, sb, sb.(*client.Sandbox).WorkDir())
		})
	}
}

func probeASiblingThatIsNotThere(t *testing.T, sb sandbox.Sandbox, wd string) {
	t.Helper()
	ctx := itest.Context(t)
	sibling := path.Join(path.Dir(wd), "outside-"+path.Base(wd))
	err := sb.WriteFile(ctx, path.Join(sibling, "planted.txt"), []byte("outside"), wd)
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a write outside the working directory: %v; want it refused", err)
	}
	res, err := sb.Exec(ctx, sandbox.Argv("test", "-e", "planted.txt"), sibling, time.Minute)
	if err != nil {
		t.Fatalf("test in %s: %v; want an ExecResult, as the spec answers a process the runtime could not start", sibling, err)
	}
	if res.ExitCode != 126 || res.NotStarted != sandbox.StartWorkDir || len(res.StdoutBytes) != 0 || len(res.StderrBytes) == 0 {
		t.Fatalf("test in %s: exit %d, not started %q, stdout %q, stderr %q; want 126, work_dir, the runtime's words on stderr only",
			sibling, res.ExitCode, res.NotStarted, res.StdoutBytes, res.StderrBytes)
	}
	t.Logf("stderr: %s", res.StderrBytes)
	// The sandbox is unharmed.
	if res, err := sb.Exec(ctx, sandbox.Argv("echo", "ok"), wd, time.Minute); err != nil || res.Stdout() != "ok\n" {
		t.Fatalf("exec after = %+v, %v", res, err)
	}
}
