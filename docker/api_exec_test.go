package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// TestFrozenStartRefusal: a freeze that lands between exec create and exec start is
// refused by the start (a 409 before any stream), and that refusal is the frozen refusal too:
// ErrPaused, exit non-zero, nothing on stdout, the command never started.
func TestFrozenStartRefusal(t *testing.T) {
	a, id, ctx := execTarget(t)
	b, err := a.ready(ctx)
	if err != nil {
		t.Fatal(err)
	}
	created, err := b.client.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"touch", "/ran"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Unpause(context.Background(), id) })
	_, _, err = b.startExec(ctx, created.ID)
	var ans *apiAnswer
	if !errors.As(err, &ans) || ans.status != 409 {
		t.Fatalf("start on a frozen container = %v, want the daemon's 409", err)
	}
	out, err := b.refused(ctx, []string{"exec", id, "touch", "/ran"}, id, err)
	if !errors.Is(err, ErrPaused) || out.ExitCode == 0 || len(out.Stdout) != 0 {
		t.Fatalf("refused = %+v, %v; want the frozen refusal", out, err)
	}
	if err := a.Unpause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if e, err := a.StatType(ctx, id, "/ran"); err != nil || e != nil {
		t.Fatalf("the refused command ran: %+v, %v", e, err)
	}
}

// TestExecAsksAgainWhileAPauseLifts: an exec refused because the container is paused is asked
// again for a moment (20.10 reports a thawed container paused until containerd's late event
// lands), so a pause lifted 100 ms after the exec was sent lets it run; a pause held past the
// waits is still answered with the frozen refusal.
func TestExecAsksAgainWhileAPauseLifts(t *testing.T) {
	a, id, ctx := execTarget(t)
	t.Cleanup(func() { _ = a.Unpause(context.Background(), id) })
	if err := a.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	lifted := time.AfterFunc(100*time.Millisecond, func() { _ = a.Unpause(context.Background(), id) })
	defer lifted.Stop()
	out, err := a.Exec(ctx, ExecRequest{Target: id, Argv: []string{"echo", "ok"}})
	if err != nil || out.ExitCode != 0 || string(out.Stdout) != "ok\n" {
		t.Fatalf("exec while the pause lifts = %+v, %v; want it run", out, err)
	}
	if err := a.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	out, err = a.Exec(ctx, ExecRequest{Target: id, Argv: []string{"echo", "ok"}})
	if !errors.Is(err, ErrPaused) || out.ExitCode == 0 || len(out.Stdout) != 0 {
		t.Fatalf("exec under a held pause = %+v, %v; want the frozen refusal", out, err)
	}
}

// execTarget returns an engine on this daemon, a running busybox container and a minute's
// context for the test.
func execTarget(t *testing.T) (*Engine, string, context.Context) {
	t.Helper()
	id := dockertest.RunContainer(t, dockertest.Busybox(t))
	a, err := NewEngine(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return a, id, ctx
}
