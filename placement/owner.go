package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Owner is one engine's share of a cluster's sandbox ownership, in front of the engine's
// router: it answers whether an acquire is served here or forwarded to another engine
// ([Owner.Route], [Owner.Lighter]), takes a lapsed owner's sandbox over, renews the leases it
// holds and fences the calls made under them, and announces the engine's load. The engine
// carries a forward itself (the request/reply transport is the engine's). Build it with
// [NewOwner], start its goroutines with [Owner.Start] and end them, releasing every lease, with
// [Owner.Stop]. Without [WithStore] every acquire is served here and nothing is leased; its
// methods are safe for concurrent use.
type Owner struct {
	engine  string
	router  *sandbox.Router
	o       ownerOptions
	log     *zap.Logger
	leases  *leases
	balance balance
	cold    atomic.Int64 // acquires running, announced as ColdInFlight
	lame    atomic.Bool  // lame duck: no new sandboxes

	stop     chan struct{}
	done     sync.WaitGroup
	stopOnce sync.Once
}

// ErrLameDuck is the answer of [Owner.Route] to an acquire of a sandbox no live engine owns,
// once the owner is in lame duck ([Owner.LameDuck]).
var ErrLameDuck = errors.New("placement: the engine takes no new sandboxes")

// TakeoverError is a takeover this engine could not complete: the sandbox's lapsed owner was
// on another daemon, and this daemon's older container of the sandbox could not be removed.
// The claim it made is released.
type TakeoverError struct {
	Daemon  string // the lapsed owner's daemon
	Failure sandbox.DisposalFailure
}

func (e *TakeoverError) Error() string {
	return fmt.Sprintf("took the sandbox over from daemon %s, but this daemon's older container of it could not be removed (%v)", e.Daemon, &e.Failure)
}

// NewOwner makes engine's ownership component over router. It fails with a
// [*sandbox.InvalidArgumentError] for an empty engine, a nil router, a bad option or a store
// that claims for another engine.
func NewOwner(engine string, router *sandbox.Router, opts ...OwnerOption) (*Owner, error) {
	if engine == "" || router == nil {
		return nil, errOption("an engine ID and a router are required")
	}
	o := ownerOptions{logger: zap.NewNop(), load: func() (int, bool) { return 0, false }}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.store != nil && o.store.Engine() != engine {
		return nil, errOption("the placement store claims for engine %q, not %q", o.store.Engine(), engine)
	}
	return &Owner{engine: engine, router: router, o: o, log: o.logger, leases: newLeases(), stop: make(chan struct{})}, nil
}

// Start starts renewing the leases (with a store) and announcing the engine (with members).
func (ow *Owner) Start() {
	if ow.o.store != nil {
		ow.done.Add(1)
		go ow.renewer()
	}
	if ow.o.members != nil {
		ow.done.Add(1)
		go ow.announcer()
	}
}

// Stop ends the renewal and the announcements (the engine leaves the members bucket) and gives
// every lease up, so that another engine can take the sandboxes over at once instead of after
// a lapse. ctx bounds the releases. Calling it again does nothing.
func (ow *Owner) Stop(ctx context.Context) {
	ow.stopOnce.Do(func() {
		close(ow.stop)
		ow.done.Wait()
		if ow.o.store == nil {
			return
		}
		for _, h := range ow.leases.take(func(heldLease) bool { return true }) {
			if err := ow.o.store.Release(ctx, h.lease); err != nil {
				ow.log.Debug("release a placement entry at stop", zap.String("entry", h.lease.Entry), zap.Error(err))
			}
		}
	})
}

// Placed reports whether the owner keeps placement (it has a store).
func (ow *Owner) Placed() bool { return ow.o.store != nil }

// LameDuck makes [Owner.Route] refuse new sandboxes ([ErrLameDuck]) while it forwards an
// acquire of one another engine owns. It cannot be undone.
func (ow *Owner) LameDuck() { ow.lame.Store(true) }

// Acquiring counts an acquire in the engine's announced load until the returned function runs.
func (ow *Owner) Acquiring() (done func()) {
	ow.cold.Add(1)
	return func() { ow.cold.Add(-1) }
}

// Leases is how many leases the owner holds.
func (ow *Owner) Leases() int { return ow.leases.count() }

// Route is where an acquire is served: here, under a lease this engine holds, or on Engine.
type Route struct {
	Here   bool
	Engine string // the owner to forward the acquire to, when not Here
	claim  *Lease // a lease Route claimed for this acquire, for Abandon
}

// Route makes this engine the owner of (key, kind) before an acquire creates anything, or says
// which engine owns it. A lease held already routes here; a new or lapsed entry is claimed
// (the lapsed owner's sandbox taken over, see takeOver) and routes here; an entry another live
// engine holds routes there. In lame duck a sandbox not held here is refused with
// [ErrLameDuck] unless a live engine owns it. It fails with a [*TakeoverError], or with the
// store's error when the bucket cannot be reached. Without a store it routes here.
func (ow *Owner) Route(ctx context.Context, key sandbox.Key, kind string) (Route, error) {
	p := ow.o.store
	if p == nil {
		return Route{Here: true}, nil
	}
	if l, ok := ow.leases.get(key, kind); ok && l.Valid(time.Now()) {
		return Route{Here: true}, nil // warm: ours, and the renewer keeps it so
	}
	if ow.lame.Load() {
		if r, ok, err := p.Get(ctx, key, kind); err == nil && ok && r.Engine != ow.engine && time.Now().Before(r.Expires) {
			return Route{Engine: r.Engine}, nil
		}
		return Route{}, ErrLameDuck
	}
	l, taken, err := p.Claim(ctx, key, kind)
	var held *HeldError
	switch {
	case errors.As(err, &held):
		return Route{Engine: held.Owner}, nil
	case err != nil:
		return Route{}, err
	}
	ow.leases.put(key, kind, l)
	r := Route{Here: true, claim: &l}
	from := ""
	if taken != nil {
		if err := ow.takeOver(ctx, key, kind, taken); err != nil {
			ow.Abandon(r)
			return Route{}, err
		}
		from = taken.Engine
	}
	if ow.o.hooks.Claimed != nil {
		ow.o.hooks.Claimed(ctx, key, kind, from)
	}
	return r, nil
}

// Abandon gives up the claim r made, for an acquire that then failed; a route that claimed
// nothing is left alone.
func (ow *Owner) Abandon(r Route) {
	if r.claim == nil {
		return
	}
	ow.leases.take(func(h heldLease) bool { return h.lease.Entry == r.claim.Entry })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ow.o.store.Release(ctx, *r.claim); err != nil {
		ow.log.Debug("release the claim of a failed acquire", zap.Error(err))
	}
}

// RecordInstance writes the instance an acquire handed out into the sandbox's entry when it is
// not there yet, so that a taker on this daemon can adopt it. It gives up quietly: without it
// a taker creates afresh, which loses files but never serves a wrong container.
func (ow *Owner) RecordInstance(ctx context.Context, key sandbox.Key, kind, instance string) {
	p := ow.o.store
	if p == nil {
		return
	}
	for range 3 {
		l, ok := ow.leases.get(key, kind)
		if !ok || l.Instance == instance {
			return
		}
		l.Instance = instance
		nl, err := p.Renew(ctx, l)
		if err == nil {
			ow.leases.replace(l.Revision, nl)
			return
		}
		if !errors.Is(err, ErrNotOwner) {
			ow.log.Debug("record the instance in the placement entry", zap.String("entry", l.Entry), zap.Error(err))
			return
		}
		// A renewal moved the revision meanwhile: read the lease it left and try again.
	}
}

// Holds reports whether this engine may serve (key, kind): its lease is held and valid by this
// engine's clock. Without a store it always may.
func (ow *Owner) Holds(key sandbox.Key, kind string) bool {
	if ow.o.store == nil {
		return true
	}
	l, ok := ow.leases.get(key, kind)
	return ok && l.Valid(time.Now())
}

// Fence returns ctx bounded by the lease of (key, kind): it ends, with cause [ErrLeaseEnded],
// when the lease does. The returned function releases it. Without a lease ctx is returned as
// it is.
func (ow *Owner) Fence(ctx context.Context, key sandbox.Key, kind string) (context.Context, func()) {
	return ow.leases.fenced(ctx, key, kind)
}

// Release forgets and deletes the entries of the leases match accepts (dispose, scope purge).
func (ow *Owner) Release(ctx context.Context, match func(key sandbox.Key, kind string) bool) {
	if ow.o.store == nil {
		return
	}
	for _, h := range ow.leases.take(func(h heldLease) bool { return match(h.key, h.kind) }) {
		err := ow.o.store.Release(ctx, h.lease)
		if errors.Is(err, ErrNotOwner) {
			// A renewal of this engine's own moved the revision under the lease held (one in
			// flight, or one whose answer timed out): the entry is still this engine's to end.
			err = ow.o.store.ReleaseKey(ctx, h.key, h.kind, h.lease.Revision+1)
		}
		if err != nil {
			ow.log.Debug("release a placement entry", zap.String("entry", h.lease.Entry), zap.Error(err))
		}
	}
}
