package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// Close cancels the execs in flight, and their callers hear ErrEngineStopped at once rather
// than waiting for the exec's timeout or the ask bound.
func TestCloseAnswersAnExecInFlight(t *testing.T) {
	defer goleak.VerifyNone(t)
	f, b, sb := runtimeSandbox(t)
	ctx := context.Background()
	started := make(chan struct{})
	f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		close(started)
		<-ctx.Done()
		return docker.ExecOutput{}, ctx.Err()
	}
	done := make(chan error)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Argv("long"), "/", time.Minute)
		done <- err
	}()
	<-started
	b.Close(ctx)
	select {
	case err := <-done:
		if !errors.Is(err, ErrEngineStopped) {
			t.Fatalf("exec in flight at Close = %v, want ErrEngineStopped", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("an exec in flight at Close never returned")
	}
}
