package placement

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// takeOver readies this engine's daemon for a sandbox whose lapsed owner it just replaced.
// On the owner's own daemon the owner's container is the one the acquire finds under the
// sandbox's name, and the acquire adopts it: same instance, same files, and a freeze the dead
// owner left is thawed there (actors, recoverFrozen) — by the new owner, the only process now
// entitled to. On another daemon the owner's container stays where it is, for that host's
// reaper; a container this daemon holds under the name is from an older tenure here, and
// adopting it would serve stale files as current, so it is disposed and the acquire creates
// afresh. When either daemon is unrecorded the container found is adopted.
func (ow *Owner) takeOver(ctx context.Context, key sandbox.Key, kind string, taken *Record) error {
	here := ow.o.store.Daemon()
	log := ow.log.With(zap.Stringer("key", key), zap.String("kind", kind), zap.String("from", taken.Engine))
	if taken.Daemon == "" || here == "" || taken.Daemon == here {
		// The router trusts no instance it did not hand out itself (the protocol's acquire,
		// step 7); the record vouches for the one the owner handed out, and only that one.
		ow.router.Vouch(key, kind, ow.backend(), taken.Instance)
		log.Info("took a lapsed sandbox over on its daemon; adopting its container", zap.String("instance", taken.Instance))
		return nil
	}
	log.Info("took a lapsed sandbox over from another daemon; creating it afresh here",
		zap.String("from_daemon", taken.Daemon))
	if f := ow.router.Dispose(ctx, key, sandbox.DisposeOptions{Kind: &kind}); f != nil {
		return &TakeoverError{Daemon: taken.Daemon, Failure: *f}
	}
	return nil
}

// backend is the name the router serves under, which a vouch names.
func (ow *Owner) backend() string {
	if b := ow.router.Backend(); b != nil {
		return b.Name()
	}
	return "engine"
}

// A dispose or scope purge ends the placement entries of the sandboxes it names, wherever it
// landed. Of those entries, one another live engine owns is that engine's to dispose (the
// engine forwards the call there); one whose owner lapsed is claimed first — taken over, as an
// acquire would — and one of this engine's own that it no longer holds (a restart under the
// same ID) renewed, so that the local dispose that follows releases it like any lease held.

// ClaimKeyEntries does the above for the entries of key's sandboxes (of kind alone when it is
// not nil) and returns those other live engines own. It fails when the entries cannot be read
// or one cannot be taken over: the dispose must then stop before it touches anything. Without a
// store it returns none.
func (ow *Owner) ClaimKeyEntries(ctx context.Context, key sandbox.Key, kind *string) ([]Entry, error) {
	if ow.o.store == nil {
		return nil, nil
	}
	es, err := ow.o.store.KeyEntries(ctx, key, kind)
	return ow.claimEntries(ctx, es, err)
}

// ClaimScopeEntries is [Owner.ClaimKeyEntries] for the entries of every sandbox of
// (scope, thread).
func (ow *Owner) ClaimScopeEntries(ctx context.Context, scope, thread string) ([]Entry, error) {
	if ow.o.store == nil {
		return nil, nil
	}
	es, err := ow.o.store.ScopeEntries(ctx, scope, thread)
	return ow.claimEntries(ctx, es, err)
}

func (ow *Owner) claimEntries(ctx context.Context, entries []Entry, err error) ([]Entry, error) {
	if err != nil {
		return nil, fmt.Errorf("read the placement entries: %w", err)
	}
	p := ow.o.store
	var others []Entry
	for _, e := range entries {
		r := e.Record
		if r.Engine != ow.engine && !p.Lapsed(r) {
			others = append(others, e)
			continue
		}
		if _, ok := ow.leases.get(e.Key, e.Kind); ok && r.Engine == ow.engine {
			continue // held: the local dispose releases it
		}
		l, _, err := p.Claim(ctx, e.Key, e.Kind)
		var held *HeldError
		switch {
		case errors.As(err, &held):
			// Another engine claimed it meanwhile: its to dispose.
			e.Record = Record{Engine: held.Owner, Expires: held.Expires}
			others = append(others, e)
		case err != nil:
			return others, fmt.Errorf("take over the placement entry of %s (kind %q): %w", e.Key, e.Kind, err)
		default:
			if r.Engine != ow.engine {
				ow.log.Info("took a lapsed sandbox over to dispose of it", zap.Stringer("key", e.Key),
					zap.String("kind", e.Kind), zap.String("from", r.Engine))
			}
			ow.leases.put(e.Key, e.Kind, l)
		}
	}
	return others, nil
}
