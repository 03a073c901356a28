package placement

import (
	"context"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// OwnerOption configures an [Owner]. Nil options are skipped; the first error stops [NewOwner].
type OwnerOption func(*ownerOptions) error

type ownerOptions struct {
	logger    *zap.Logger
	store     *Store
	members   *Members
	daemon    string
	load      func() (sandboxes int, draining bool)
	hooks     Hooks
	forwarder Forwarder // layer.go; nil: every call served here
}

// Hooks are what an [Owner] tells its engine of, each optional. They run on the goroutine of
// the change, so they must not block for long.
type Hooks struct {
	// Claimed: this engine now owns (key, kind), claimed for an acquire; from names the lapsed
	// owner it took the sandbox over from, empty for a sandbox nobody held. ctx is the acquire's.
	Claimed func(ctx context.Context, key sandbox.Key, kind, from string)
	// Lost: a renewal found (key, kind) another engine's; the engine must stop serving it.
	Lost func(key sandbox.Key, kind string)
}

// WithStore makes the owner claim, forward, take over and renew through s (the placement
// bucket); s's engine must be the owner's. Without it every acquire is served here.
func WithStore(s *Store) OwnerOption {
	return func(o *ownerOptions) error {
		if s == nil {
			return errOption("nil placement store")
		}
		o.store = s
		return nil
	}
}

// WithMembers makes the owner announce its engine in m every third of m's TTL, naming daemon,
// and leave at Stop; with [WithStore] too it reads the others' load after each announcement
// for [Owner.Lighter].
func WithMembers(m *Members, daemon string) OwnerOption {
	return func(o *ownerOptions) error {
		if m == nil {
			return errOption("nil members bucket")
		}
		o.members, o.daemon = m, daemon
		return nil
	}
}

// WithLoad gives the owner the engine's side of its announcement: the sandboxes it serves and
// whether it drains (default: none, not draining).
func WithLoad(load func() (sandboxes int, draining bool)) OwnerOption {
	return func(o *ownerOptions) error {
		if load != nil {
			o.load = load
		}
		return nil
	}
}

// WithHooks sets what the owner tells its engine of (see [Hooks]).
func WithHooks(h Hooks) OwnerOption {
	return func(o *ownerOptions) error { o.hooks = h; return nil }
}

// WithOwnerLogger sets the owner's logger (default: none).
func WithOwnerLogger(l *zap.Logger) OwnerOption {
	return func(o *ownerOptions) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}
