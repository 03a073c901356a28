package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// TestConnectionDropMidExecIsOutcomeUnknown: an exec whose connection drops while the engine
// runs it — the client's own, or the engine's — answers client.ErrOutcomeUnknown, not a result
// and not the wait for its timeout; the command ran once, and the client goes on working.
func TestConnectionDropMidExecIsOutcomeUnknown(t *testing.T) {
	for _, side := range []string{"client", "engine"} {
		t.Run(side, func(t *testing.T) {
			fake := newFake(t)
			blk := &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
			e := startEngine(t, &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
				blk.Sandbox = sb
				return blk
			}})
			nc := natstest.Connect(t, e.srv, nats.ReconnectWait(10*time.Millisecond))
			cl, err := client.New(ctxT(t), nc, client.WithLogger(zaptest.NewLogger(t)),
				client.WithLivenessInterval(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			sb, err := cl.Acquire(ctx, testKey, testSpec(t))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
				done <- err
			}()
			<-blk.started
			// Long enough in flight that a younger engine connection is younger than the call.
			time.Sleep(50 * time.Millisecond)
			drop := nc
			if side == "engine" {
				drop = e.nc
			}
			if err := drop.ForceReconnect(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			close(blk.release)
			time.Sleep(100 * time.Millisecond) // a repeated exec would have started by now
			if !errors.Is(err, client.ErrOutcomeUnknown) {
				t.Fatalf("exec cut off by the %s's drop: %v, want client.ErrOutcomeUnknown", side, err)
			}
			var ou *client.OutcomeUnknownError
			if !errors.As(err, &ou) || ou.Reason == "" {
				t.Fatalf("not an *OutcomeUnknownError with a reason: %#v", err)
			}
			if _, err := sb.StatFile(ctx, ".", "."); err != nil {
				t.Fatalf("a call after the drop: %v", err)
			}
			if len(blk.started) != 0 {
				t.Fatalf("the exec was sent again")
			}
		})
	}
}

// blockFirstStat holds the first StatFile until release is closed, telling started when it
// begins, and counts every StatFile.
type blockFirstStat struct {
	sandbox.Sandbox
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockFirstStat) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	if b.calls.Add(1) == 1 {
		close(b.started)
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Sandbox.StatFile(ctx, p, wd)
}

// TestConnectionDropMidStatIsRepeated: a stat cut off by the client's connection drop is sent
// again after the reconnect and answers; the engine saw it twice.
func TestConnectionDropMidStatIsRepeated(t *testing.T) {
	fake := newFake(t)
	blk := &blockFirstStat{started: make(chan struct{}), release: make(chan struct{})}
	e := startEngine(t, &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
		blk.Sandbox = sb
		return blk
	}})
	nc := natstest.Connect(t, e.srv, nats.ReconnectWait(10*time.Millisecond))
	cl, err := client.New(ctxT(t), nc, client.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	sb, err := cl.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.StatFile(ctx, ".", ".")
		done <- err
	}()
	<-blk.started
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the repeat is on its way; the first may not answer it
	close(blk.release)
	if err := <-done; err != nil {
		t.Fatalf("stat cut off by the drop: %v, want it repeated and answered", err)
	}
	if n := blk.calls.Load(); n != 2 {
		t.Fatalf("the engine saw %d stats, want 2 (the cut-off one and its repeat)", n)
	}
}

// slowFirstAcquire holds the first Acquire until release is closed, telling started when it
// begins, and counts every Acquire.
type slowFirstAcquire struct {
	*sandboxtest.Backend
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (b *slowFirstAcquire) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.calls.Add(1) == 1 {
		close(b.started)
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.Backend.Acquire(ctx, key, spec)
}

// TestEngineReconnectMidColdAcquireIsRepeated: an acquire on the pool's shared subject, in
// flight when the engine's connection is re-established, is sent again (the pool's alive
// subject says an engine reconnected since) and answers.
func TestEngineReconnectMidColdAcquireIsRepeated(t *testing.T) {
	slow := &slowFirstAcquire{Backend: newFake(t), started: make(chan struct{}), release: make(chan struct{})}
	e := startEngine(t, slow)
	cl := newClient(t, e, client.WithLivenessInterval(100*time.Millisecond))
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() {
		_, err := cl.Acquire(ctx, testKey, testSpec(t))
		done <- err
	}()
	<-slow.started
	time.Sleep(50 * time.Millisecond) // the acquire has waited longer than the new connection will be old
	if err := e.nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	// The repeat waits behind the first on the key; the engine counts both in flight.
	observer := newClient(t, e)
	for {
		h, err := observer.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.InFlight >= 2 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the acquire answered %v before it was sent again", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(slow.release)
	if err := <-done; err != nil {
		t.Fatalf("acquire cut off by the engine's reconnect: %v, want it repeated and answered", err)
	}
	if n := slow.calls.Load(); n != 2 {
		t.Fatalf("the backend saw %d acquires, want 2 (the cut-off one and its repeat)", n)
	}
}
