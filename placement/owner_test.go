package placement_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// owner builds and starts an Owner for engine over store s, stopped with the test.
func owner(t *testing.T, engine string, opts ...placement.OwnerOption) *placement.Owner {
	t.Helper()
	router, err := sandbox.NewRouter(nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := placement.NewOwner(engine, router, opts...)
	if err != nil {
		t.Fatalf("NewOwner(%s): %v", engine, err)
	}
	o.Start()
	t.Cleanup(func() { o.Stop(context.Background()) })
	return o
}

// TestOwnerRoutesHereOrToTheOwner: the first engine to route a key claims it and serves it
// (its Claimed hook told, the lease fencing its calls); the second is routed to the first; in
// lame duck a new key is refused and a held one still routed; once the first stops, its leases
// are given up and the second claims the key.
func TestOwnerRoutesHereOrToTheOwner(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	var claims atomic.Int32
	a := owner(t, "a", placement.WithStore(store(t, url, "a")), placement.WithHooks(placement.Hooks{
		Claimed: func(context.Context, sandbox.Key, string, string) { claims.Add(1) }}))
	b := owner(t, "b", placement.WithStore(store(t, url, "b")))
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}

	r, err := a.Route(t.Context(), k, "py")
	if err != nil || !r.Here {
		t.Fatalf("a routes a new key to %+v, %v; want here", r, err)
	}
	if claims.Load() != 1 || !a.Holds(k, "py") || a.Leases() != 1 {
		t.Fatalf("after a's claim: %d claims told, holds %v, %d leases", claims.Load(), a.Holds(k, "py"), a.Leases())
	}
	if r, err := a.Route(t.Context(), k, "py"); err != nil || !r.Here || claims.Load() != 1 {
		t.Fatalf("a routes its warm key to %+v, %v (%d claims); want here, no new claim", r, err, claims.Load())
	}
	if r, err := b.Route(t.Context(), k, "py"); err != nil || r.Here || r.Engine != "a" {
		t.Fatalf("b routes a's key to %+v, %v; want engine a", r, err)
	}
	if b.Holds(k, "py") {
		t.Fatal("b holds a's key")
	}

	b.LameDuck()
	other := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "y"}
	if _, err := b.Route(t.Context(), other, "py"); !errors.Is(err, placement.ErrLameDuck) {
		t.Fatalf("b in lame duck routes a new key: %v, want ErrLameDuck", err)
	}
	if r, err := b.Route(t.Context(), k, "py"); err != nil || r.Engine != "a" {
		t.Fatalf("b in lame duck routes a's key to %+v, %v; want engine a", r, err)
	}

	ctx, end := a.Fence(t.Context(), k, "py")
	defer end()
	a.Stop(t.Context())
	if !errors.Is(context.Cause(ctx), placement.ErrLeaseEnded) {
		t.Fatalf("a call fenced by a's lease outlived a's stop: cause %v", context.Cause(ctx))
	}
	c := owner(t, "c", placement.WithStore(store(t, url, "c")))
	if r, err := c.Route(t.Context(), k, "py"); err != nil || !r.Here {
		t.Fatalf("c routes the key a gave up to %+v, %v; want here", r, err)
	}
}

// TestOwnerWithoutAStoreServesHere: with no placement every acquire is served here and every
// call may run; a store of another engine is refused.
func TestOwnerWithoutAStoreServesHere(t *testing.T) {
	noLeaks(t)
	o := owner(t, "solo")
	k := sandbox.Key{Scope: "s"}
	if r, err := o.Route(t.Context(), k, "py"); err != nil || !r.Here || !o.Holds(k, "py") || o.Placed() {
		t.Fatalf("without a store: route %+v, %v, holds %v, placed %v", r, err, o.Holds(k, "py"), o.Placed())
	}
	o.LameDuck()
	if r, err := o.Route(t.Context(), k, "py"); err != nil || !r.Here {
		t.Fatalf("without a store in lame duck: route %+v, %v; want here", r, err)
	}
	if o.Lighter(k, "py") != "" {
		t.Fatal("without a store the owner hands an acquire on")
	}
	router, _ := sandbox.NewRouter(nil)
	if _, err := placement.NewOwner("x", router, placement.WithStore(store(t, embedded(t), "y"))); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("an owner over another engine's store: %v, want invalid", err)
	}
}

// TestOwnerAnnouncesItsLoadAndLeaves: the owner announces its engine's load, its cold acquires
// included, and leaves the members bucket at Stop.
func TestOwnerAnnouncesItsLoadAndLeaves(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	_, js := jsOn(t, url)
	m, err := placement.NewMembers(t.Context(), js, placement.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	o := owner(t, "m1", placement.WithMembers(m, "d1"), placement.WithLoad(func() (int, bool) { return 3, false }))
	done := o.Acquiring()
	eventually(t, "m1 announces 3 sandboxes and 1 cold acquire", func() bool {
		ms, err := m.List(t.Context())
		return err == nil && len(ms) == 1 && ms[0].Engine == "m1" && ms[0].Daemon == "d1" && ms[0].Sandboxes == 3 && ms[0].ColdInFlight == 1
	})
	done()
	o.Stop(t.Context())
	if ms, err := m.List(t.Context()); err != nil || len(ms) != 0 {
		t.Fatalf("after stop the members are %+v, %v; want none", ms, err)
	}
}

// TestOwnerKeepsALeaseWhoseRenewalItDidNotHear: a renewal the bucket took but whose answer
// the owner never had (its timeout passed first, as under load) moves the entry's revision
// under the owner's lease. Made here by a write of the same engine through another store, it
// must not cost the sandbox: the owner adopts its own write, keeps renewing and serving past
// several leases, never reports the lease lost, and another engine is still routed to it.
func TestOwnerKeepsALeaseWhoseRenewalItDidNotHear(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	const lease = 1500 * time.Millisecond // its renewals time out at a third: long enough for a loaded machine
	var lost atomic.Int32
	a := owner(t, "a", placement.WithStore(store(t, url, "a", placement.WithLease(lease))), placement.WithHooks(placement.Hooks{
		Lost: func(sandbox.Key, string) { lost.Add(1) }}))
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}
	if r, err := a.Route(t.Context(), k, "py"); err != nil || !r.Here {
		t.Fatalf("a routes a new key to %+v, %v; want here", r, err)
	}
	// The renewal a never heard of: engine a's own write, on the entry's current revision.
	unheard := store(t, url, "a", placement.WithLease(lease))
	for {
		r, ok, err := unheard.Get(t.Context(), k, "py")
		if err != nil || !ok {
			t.Fatalf("read a's entry: %+v %v %v", r, ok, err)
		}
		_, err = unheard.Renew(t.Context(), placement.Lease{Entry: placement.EntryKey(k, "py"), Engine: "a", Revision: r.Revision, Instance: r.Instance})
		if err == nil {
			break
		}
		if !errors.Is(err, placement.ErrNotOwner) { // a's renewer moved it first: read again
			t.Fatal(err)
		}
	}
	ctx, end := a.Fence(t.Context(), k, "py")
	defer end()
	time.Sleep(3 * lease) // without the adoption the lease is dropped one lease after the write
	if n := lost.Load(); n != 0 || !a.Holds(k, "py") || ctx.Err() != nil {
		t.Fatalf("after a write of its own it did not hear of: lost told %d times, holds %v, fenced call %v", n, a.Holds(k, "py"), context.Cause(ctx))
	}
	b := owner(t, "b", placement.WithStore(store(t, url, "b", placement.WithLease(lease))))
	if r, err := b.Route(t.Context(), k, "py"); err != nil || r.Here || r.Engine != "a" {
		t.Fatalf("b routes a's key to %+v, %v; want engine a", r, err)
	}
}

// TestOwnerReleasesAnEntryARenewalMoved: a dispose releases its sandbox's entry even when a
// renewal of the engine's own moved the entry's revision under the lease the owner holds (a
// renewal in flight as the dispose lands, or one whose answer timed out under load): the
// entry is deleted, not left naming this engine until its lease lapses.
func TestOwnerReleasesAnEntryARenewalMoved(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	const lease = 30 * time.Second // no renewal of the owner's own runs during the test
	a := owner(t, "a", placement.WithStore(store(t, url, "a", placement.WithLease(lease))))
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}
	if r, err := a.Route(t.Context(), k, "py"); err != nil || !r.Here {
		t.Fatalf("a routes a new key to %+v, %v; want here", r, err)
	}
	other := store(t, url, "a", placement.WithLease(lease))
	r, ok, err := other.Get(t.Context(), k, "py")
	if err != nil || !ok {
		t.Fatalf("read a's entry: %+v %v %v", r, ok, err)
	}
	if _, err := other.Renew(t.Context(), placement.Lease{Entry: placement.EntryKey(k, "py"), Engine: "a", Revision: r.Revision, Instance: r.Instance}); err != nil {
		t.Fatal(err)
	}
	a.Release(t.Context(), func(key sandbox.Key, kind string) bool { return key == k && kind == "py" })
	if r, ok, err := other.Get(t.Context(), k, "py"); err != nil || ok {
		t.Fatalf("after the release: entry %+v (present %v, %v); want none", r, ok, err)
	}
}
