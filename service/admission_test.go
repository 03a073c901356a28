package service_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestHealthIsNeverStarved: an engine at its bound of calls in flight refuses the next call
// (engine_unavailable) and still answers health, which says how many calls hold it.
func TestHealthIsNeverStarved(t *testing.T) {
	const bound = 2
	started, release := make(chan struct{}, bound), make(chan struct{})
	fake := newFake(t)
	e := startEngine(t, &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
		return &blocking{Sandbox: sb, started: started, release: release}
	}}, service.WithMaxInFlight(bound))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the engine's stop, which waits for the held execs
	c := newClient(t, e, client.WithRetryWait(0))
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	done := make(chan error, bound)
	for range bound {
		go func() {
			_, err := sb.Exec(ctx, sandbox.Argv("wait"), ".", time.Minute)
			done <- err
		}()
	}
	for range bound {
		<-started
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("an exec past the engine's bound: %v, want engine_unavailable", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != service.HealthOK || h.InFlight != bound {
		t.Fatalf("health at the bound: %+v, %v; want ok with %d in flight", h, err, bound)
	}
	free()
	for range bound {
		if err := <-done; err != nil {
			t.Fatalf("held exec: %v", err)
		}
	}
}
