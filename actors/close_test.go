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
// than waiting for the exec's timeout or the ask bound. The second case forces the race
// behind the first: the exec's host side comes back only after Close has stopped the actors,
// so its continuation never runs and the stop answers the caller — and the write stashed
// behind the exec (it needs a freeze, which waits for the exec's start) is answered too.
func TestCloseAnswersAnExecInFlight(t *testing.T) {
	cases := []struct {
		name     string
		outlives bool
	}{
		{"the host side ends at the cancel", false},
		{"the host side outlives the actor", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer verifyNoneWithin(t, 3*time.Second)
			f, b, sb := runtimeSandbox(t)
			ctx := context.Background()
			started, closed, hostDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
				defer close(hostDone)
				close(started)
				<-ctx.Done()
				if tc.outlives {
					<-closed
				}
				return docker.ExecOutput{}, ctx.Err()
			}
			done := make(chan error, 1)
			go func() {
				_, err := sb.Exec(ctx, sandbox.Argv("long"), "/", time.Minute)
				done <- err
			}()
			<-started
			waits := map[string]chan error{"exec in flight": done}
			if tc.outlives { // else the exec ends at the cancel, and a write behind it could run
				stashed := make(chan error, 1)
				go func() { stashed <- sb.WriteFile(ctx, "a", []byte("x"), "/tmp") }()
				time.Sleep(50 * time.Millisecond) // let it reach the actor and wait in its stash
				waits["write stashed behind it"] = stashed
			}
			b.Close(ctx)
			for what, c := range waits {
				select {
				case err := <-c:
					if !errors.Is(err, ErrEngineStopped) {
						t.Fatalf("%s at Close = %v, want ErrEngineStopped", what, err)
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("the %s at Close never returned", what)
				}
			}
			close(closed)
			<-hostDone
		})
	}
}

// verifyNoneWithin is goleak.VerifyNone with room for protoactor's dead-letter throttle: a
// message to a stopped actor (an exec's continuation, a request racing a passivation) is a
// dead letter, and the throttle's timer goroutine, which nothing can stop, lives a second
// after it — longer on a loaded machine than goleak's own retries wait. Every actors test
// checks for leaks through it.
func verifyNoneWithin(t *testing.T, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); goleak.Find() != nil && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t)
}
