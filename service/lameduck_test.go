package service_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
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

// TestLameDuckThroughTheAPI: the lame_duck call on an engine's own subject puts it in lame
// duck: its health says draining, the pool's new keys go to the other engine, and a second
// call answers already.
func TestLameDuckThroughTheAPI(t *testing.T) {
	srv := natstest.Run(t)
	e1 := startEngineOn(t, srv, newFake(t))
	e2 := startEngineOn(t, srv, newFake(t))
	ctx := ctxT(t)
	ops := newClient(t, e1, client.WithRetryWait(0))
	if _, err := ops.LameDuck(ctx, ""); !errors.As(err, new(*sandbox.InvalidArgumentError)) {
		t.Fatalf("lame duck naming no engine: %v, want invalid_argument", err)
	}
	resp, err := ops.LameDuck(ctx, e1.svc.EngineID())
	if err != nil || resp.Engine != e1.svc.EngineID() || resp.Already {
		t.Fatalf("lame duck: %+v, %v", resp, err)
	}
	pinned := newClient(t, e1, client.WithEngine(e1.svc.EngineID()))
	if h, err := pinned.Health(ctx); err != nil || h.Status != service.HealthDraining {
		t.Fatalf("health after the lame_duck call: %+v, %v", h, err)
	}
	for i := range 4 {
		sb, err := ops.Acquire(ctx, sandbox.Key{Scope: "new", ThreadID: fmt.Sprint(i), AgentID: "a"}, testSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := sb.(*client.Sandbox).Engine(); got != e2.svc.EngineID() {
			t.Fatalf("a new key went to %s, want %s (e1 is a lame duck)", got, e2.svc.EngineID())
		}
	}
	if resp, err := pinned.LameDuck(ctx, ""); err != nil || !resp.Already {
		t.Fatalf("lame duck again: %+v, %v; want already", resp, err)
	}
	if h, err := newClient(t, e2, client.WithEngine(e2.svc.EngineID())).Health(ctx); err != nil || h.Status != service.HealthOK {
		t.Fatalf("the other engine's health: %+v, %v", h, err)
	}
}

// TestTenancyLameDuckIsForOperators: on an engine with tenancy, a tenant's lame_duck is
// forbidden and leaves the engine serving; the operator account's puts it in lame duck.
func TestTenancyLameDuckIsForOperators(t *testing.T) {
	svc, conns := tenantsEngine(t, &service.Tenancy{SameName: true, Operators: []string{"OPS"}})
	subject := messages.Engine(messages.SubjectEngineLameDuckT, messages.DefaultPrefix, svc.EngineID())
	body := map[string]any{"type": messages.APILameDuckRequestType}
	health := messages.Engine(messages.SubjectEngineHealthT, messages.DefaultPrefix, svc.EngineID())
	status := func() string {
		_, out := rawCall(t, conns["A"], health, nil, map[string]any{"type": messages.APIHealthRequestType})
		s, _ := out["status"].(string)
		return s
	}
	if code, out := rawCall(t, conns["A"], subject, nil, body); code != messages.CodeForbidden {
		t.Fatalf("tenant A's lame_duck: code %q, want forbidden: %v", code, out)
	}
	if s := status(); s != service.HealthOK {
		t.Fatalf("health after a refused lame_duck: %q, want ok", s)
	}
	if code, out := rawCall(t, conns["OPS"], subject, nil, body); code != "" {
		t.Fatalf("the operator's lame_duck: code %q: %v", code, out)
	}
	if s := status(); s != service.HealthDraining {
		t.Fatalf("health after the operator's lame_duck: %q, want draining", s)
	}
}
