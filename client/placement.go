package client

import "github.com/mafsandbox/engine/sandbox"

// Placement tells which engine owns a sandbox: *placement.Store is one (package placement),
// answering from its watched copy of the cluster's placement bucket.
type Placement interface {
	Owner(key sandbox.Key, kind string) (engine string, ok bool)
}

// WithPlacement routes a key's acquires (and a dispose that names a kind) to the engine the
// cluster's placement record names, instead of to the engine this client last saw serve the
// key: a client that never saw the acquire, or a restarted one, finds the sandbox by its key.
// A key with no live record goes to the pool, whose engine claims it. Default: none, the
// client's own memory.
func WithPlacement(p Placement) Option {
	return func(o *options) error {
		if p == nil {
			return errOption("nil placement")
		}
		o.placement = p
		return nil
	}
}

// owner is the engine a call on (key, kind) should go to, or "" for the pool: the placement
// record when the client has one, else the engine that last served the key.
func (b *Backend) owner(key sandbox.Key, kind *string) string {
	if b.o.placement != nil && kind != nil {
		if e, ok := b.o.placement.Owner(key, *kind); ok {
			return e
		}
		return ""
	}
	return b.placed(key)
}
