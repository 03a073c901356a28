package service_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestLameDuckTakesNoNewSandboxesAndKeepsItsOwn: an engine in lame duck gets no new keys
// through the pool and refuses them on its own subject, while the sandbox it holds keeps
// working, through its handle and through a fresh acquire of its key via the pool.
func TestLameDuckTakesNoNewSandboxesAndKeepsItsOwn(t *testing.T) {
	_, es := placedEngines(t, 2)
	e1, e2 := es[0], es[1]
	ctx := ctxT(t)
	pinned := newClient(t, e1, client.WithEngine(e1.svc.EngineID()), client.WithRetryWait(0))
	held, err := pinned.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e1.svc.LameDuck(); err != nil {
		t.Fatal(err)
	}
	if h, err := pinned.Health(ctx); err != nil || h.Status != service.HealthDraining {
		t.Fatalf("health in lame duck: %+v, %v", h, err)
	}
	pool := newClient(t, e1)
	for i := range 6 {
		sb, err := pool.Acquire(ctx, sandbox.Key{Scope: "new", ThreadID: fmt.Sprint(i), AgentID: "a"}, testSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := sb.(*client.Sandbox).Engine(); got != e2.svc.EngineID() {
			t.Fatalf("a new key went to %s, want %s (e1 drains)", got, e2.svc.EngineID())
		}
	}
	if _, err := pinned.Acquire(ctx, sandbox.Key{Scope: "new", ThreadID: "x", AgentID: "a"}, testSpec(t)); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a new key on the draining engine's own subject: %v, want engine_unavailable", err)
	}
	if _, err := held.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("the held sandbox in lame duck: %v", err)
	}
	again, err := newClient(t, e1).Acquire(ctx, testKey, testSpec(t))
	if err != nil || again.(*client.Sandbox).Engine() != e1.svc.EngineID() {
		t.Fatalf("the held key through the pool: %v, %v; want it on e1", again, err)
	}
}
