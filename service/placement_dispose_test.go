package service_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// TestPlacementDisposeOnAnotherEngineReachesTheOwner: a dispose that lands on an engine
// which does not own the sandbox is the owner's to carry out. The owner's backend disposes
// it, the owner drops its handle (health counts 0) and the entry goes; the engine the dispose
// landed on, which drives another backend here, touches nothing of its own for that kind.
func TestPlacementDisposeOnAnotherEngineReachesTheOwner(t *testing.T) {
	srv, es := placedEngines(t, 2)
	observer := placementStore(t, srv, "observer")
	ctx := ctxT(t)
	owner := newClient(t, es[0], client.WithEngine("e1"))
	other := newClient(t, es[1], client.WithEngine("e2"))
	kind := "shell"
	for _, opts := range []sandbox.DisposeOptions{{}, {Kind: &kind}} {
		if _, err := owner.Acquire(ctx, testKey, testSpec(t)); err != nil {
			t.Fatal(err)
		}
		if h, err := owner.Health(ctx); err != nil || h.Sandboxes != 1 {
			t.Fatalf("the owner's health after the acquire: %+v, %v; want 1 sandbox", h, err)
		}
		if f := other.Dispose(ctx, testKey, opts); f != nil {
			t.Fatalf("dispose %+v on the other engine: %v", opts, f)
		}
		if live := es[0].fake.Live(); len(live) != 0 {
			t.Fatalf("dispose %+v: the owner's backend still holds %v", opts, live)
		}
		if h, err := owner.Health(ctx); err != nil || h.Sandboxes != 0 {
			t.Fatalf("dispose %+v: the owner's health: %+v, %v; want 0 sandboxes", opts, h, err)
		}
		if _, ok, err := observer.Get(ctx, testKey, kind); err != nil || ok {
			t.Fatalf("dispose %+v: the entry is still there (%v, %v)", opts, ok, err)
		}
	}
	// e2 disposed of what its own backend held under the key only for the dispose of every
	// kind, never for the kind the owner disposed.
	for _, d := range es[1].fake.Disposals() {
		if d.Options.Kind != nil {
			t.Fatalf("the engine that is not the owner disposed of the owner's kind on its backend: %+v", d)
		}
	}
}

// TestPlacementDisposeEndsALapsedOwnersEntry: a dispose of a key whose owner is gone ends the
// owner's entry once its lease has lapsed; while the lease is live the dispose fails as
// unreachable and touches nothing (the owner may be cut off from NATS, not dead).
func TestPlacementDisposeEndsALapsedOwnersEntry(t *testing.T) {
	srv, es := placedEngines(t, 1)
	observer := placementStore(t, srv, "observer")
	ctx := ctxT(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	ghost := func(expires time.Time) {
		rec := fmt.Sprintf(`{"engine":"ghost","expires":%q}`, expires.UTC().Format(time.RFC3339Nano))
		if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, es[0], client.WithRetryWait(0))

	ghost(time.Now().Add(time.Hour))
	if f := c.Dispose(ctx, testKey, sandbox.DisposeOptions{}); f == nil || f.Code != sandbox.DisposalUnreachable {
		t.Fatalf("dispose while the dead owner's lease is live: %v, want unreachable", f)
	}
	if n := len(es[0].fake.Disposals()); n != 0 {
		t.Fatalf("the engine disposed of a sandbox a live lease holds (%d disposals)", n)
	}
	if _, ok, err := observer.Get(ctx, testKey, "shell"); err != nil || !ok {
		t.Fatalf("the live owner's entry went (%v, %v)", ok, err)
	}

	ghost(time.Now().Add(-time.Minute))
	if f := c.Dispose(ctx, testKey, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose after the owner's lease lapsed: %v", f)
	}
	if n := len(es[0].fake.Disposals()); n != 1 {
		t.Fatalf("%d disposals on the engine's backend, want 1", n)
	}
	if _, ok, err := observer.Get(ctx, testKey, "shell"); err != nil || ok {
		t.Fatalf("the lapsed owner's entry is still there (%v, %v)", ok, err)
	}
}

// TestPlacementScopePurgeOnAnotherEngineReachesTheOwners: a scope purge that lands on one
// engine reaches every other engine owning a sandbox of the conversation: their backends purge
// it, their handles go (health counts 0) and so do the entries; an entry of another
// conversation stays.
func TestPlacementScopePurgeOnAnotherEngineReachesTheOwners(t *testing.T) {
	srv, es := placedEngines(t, 3)
	observer := placementStore(t, srv, "observer")
	ctx := ctxT(t)
	var pinned []*client.Backend
	for i, e := range es {
		pinned = append(pinned, newClient(t, e, client.WithEngine(fmt.Sprintf("e%d", i+1))))
	}
	keyN := func(thread, agent string) sandbox.Key {
		return sandbox.Key{Scope: "s", ThreadID: thread, AgentID: agent}
	}
	purged := []sandbox.Key{keyN("1", "a"), keyN("1", "b")}
	other := keyN("2", "a")
	for i, k := range append(purged, other) { // e1, e2, and e3 the other conversation's
		if _, err := pinned[i].Acquire(ctx, k, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	p := pinned[2].DisposeScope(ctx, "s", "1")
	if p.Undisposed != nil || p.Disposed != 2 {
		t.Fatalf("purge through e3: %+v, want 2 disposed and no failure", p)
	}
	for i, k := range purged {
		if _, ok, err := observer.Get(ctx, k, "shell"); err != nil || ok {
			t.Fatalf("the entry of %v is still there (%v, %v)", k, ok, err)
		}
		if h, err := pinned[i].Health(ctx); err != nil || h.Sandboxes != 0 {
			t.Fatalf("e%d's health after the purge: %+v, %v; want 0 sandboxes", i+1, h, err)
		}
		if n := len(es[i].fake.ScopeDisposals()); n != 1 {
			t.Fatalf("e%d's backend purged %d times, want once", i+1, n)
		}
	}
	if _, ok, err := observer.Get(ctx, other, "shell"); err != nil || !ok {
		t.Fatalf("the other conversation's entry went (%v, %v)", ok, err)
	}
}
