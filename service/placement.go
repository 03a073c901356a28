package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// Ownership across engines is package placement's ([placement.Owner]), a layer around the
// router: the service dispatches acquires, disposals and purges to it, and it decides whether
// each is served here or forwarded, takes lapsed sandboxes over, renews and fences the leases
// and announces the engine. The service builds it from the options below, carries its forwards
// (forward.go) and hears of claims and losses through its hooks.

// WithPlacement makes the engine one of a cluster that records sandbox ownership in p's bucket
// (package placement): a cold acquire claims the sandbox before creating anything, an acquire
// of a sandbox another engine owns is forwarded to that engine, the engine renews the leases of
// what it holds and stops serving a sandbox whose lease it lost, and dispose, scope purge and
// Stop release its entries; a dispose or purge of a sandbox another live engine owns is
// forwarded to that engine, and a lapsed owner's entry is claimed and then released
// (placement_dispose.go). p's engine ID must be this engine's ([WithEngineID]). Without it
// (the default) the engine keeps no placement, as a single engine needs none.
func WithPlacement(p *placement.Store) Option {
	return func(o *options) error {
		if p == nil {
			return errOption("nil placement store")
		}
		o.placement = p
		return nil
	}
}

// WithMembers makes the engine announce itself in m's bucket (package placement) every third
// of its TTL — its ID, daemon, the sandboxes it holds, its cold acquires in flight and whether
// it drains — and leave it at Stop. With [WithPlacement] too, it reads the others' after each
// announcement and hands a cold acquire that came through the pool to a lighter engine
// ([placement.Owner.Lighter], [placement.Pick]). Default: no announcement.
func WithMembers(m *placement.Members, daemon string) Option {
	return func(o *options) error {
		if m == nil {
			return errOption("nil members bucket")
		}
		o.members, o.daemon = m, daemon
		return nil
	}
}

// newOwner builds the engine's ownership component from its options; it is started by New.
func (s *Service) newOwner() (*placement.Owner, error) {
	opts := []placement.OwnerOption{
		placement.WithOwnerLogger(s.log),
		placement.WithLoad(func() (int, bool) {
			s.gate.mu.Lock()
			draining := s.gate.draining || s.gate.lameDuck
			s.gate.mu.Unlock()
			return s.handles.len(), draining
		}),
		placement.WithHooks(placement.Hooks{Claimed: s.claimed, Lost: s.lost}),
		placement.WithForwarder(forwarder{s}), // forward.go
	}
	if s.o.placement != nil {
		opts = append(opts, placement.WithStore(s.o.placement))
	}
	if s.o.members != nil {
		opts = append(opts, placement.WithMembers(s.o.members, s.o.daemon))
	}
	return placement.NewOwner(s.id, s.router, opts...)
}

// claimed reports a claim the owner made for an acquire: of a sandbox no engine held, or taken
// over from the lapsed owner from.
func (s *Service) claimed(ctx context.Context, key sandbox.Key, kind, from string) {
	a := sandbox.PlacementChanged{Act: sandbox.Act{Key: key, Kind: kind}, Change: sandbox.PlacementClaimed}
	if from != "" {
		a.Change, a.Detail = sandbox.PlacementTakenOver, "from engine "+from
	}
	s.obs.PlacementChanged(ctx, a)
}

// lost drops the handles of a sandbox whose lease the owner lost, so that later calls on them
// are refused, and reports the loss.
func (s *Service) lost(key sandbox.Key, kind string) {
	s.transfers.forget(s.handles.drop(func(x *handle) bool { return x.key == key && x.kind == kind }))
	s.obs.PlacementChanged(s.ownContext(), sandbox.PlacementChanged{Act: sandbox.Act{Key: key, Kind: kind}, Change: sandbox.PlacementLost})
}

// placementError answers an acquire the owner could not route as engine_unavailable (or the
// lame duck's refusal): the client may try again, or another engine.
func (s *Service) placementError(err error) error {
	var te *placement.TakeoverError
	switch {
	case errors.Is(err, placement.ErrLameDuck):
		return s.errLameDuck()
	case errors.As(err, &te):
		return &messages.EngineUnavailableError{Reason: te.Error() + "; try again"}
	}
	return &messages.EngineUnavailableError{Reason: fmt.Sprintf("the placement bucket cannot be reached: %v", err)}
}

// fenced bounds a call on the sandbox handle names by its lease's fence
// ([placement.Owner.Fence]); for a handle this engine does not hold, ctx is returned as it is.
func (s *Service) fenced(ctx context.Context, handle string) (context.Context, func()) {
	if handle == "" {
		return ctx, func() {}
	}
	h := s.handles.get(handle)
	if h == nil {
		return ctx, func() {}
	}
	return s.owner.Fence(ctx, h.key, h.kind)
}

// fenceError answers a call that failed because its fence ended as interrupted, not
// engine_unavailable: the call was taken and may have run (an exec whose command finished as
// the lease ended), and engine_unavailable tells a client the call did not run, which it may
// then send again. The caller acquires again, and reaches the sandbox's owner.
func fenceError(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), placement.ErrLeaseEnded) {
		return &messages.InterruptedError{Reason: "this engine's placement lease on the sandbox ended during the call, which may have run; acquire the sandbox again"}
	}
	return err
}

// checkLease refuses a call on h once this engine's lease on its sandbox is gone or lapsed:
// another engine may own it by now, and only the owner may touch it.
func (s *Service) checkLease(h *handle) error {
	if s.owner.Holds(h.key, h.kind) {
		return nil
	}
	return &messages.EngineUnavailableError{Reason: "this engine no longer holds the sandbox's placement lease; acquire it again"}
}
