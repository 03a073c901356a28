package placement

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// The owner as a layer around the router: [Owner.Acquire], [Owner.Dispose] and
// [Owner.DisposeScope] are the router's, in a cluster. An acquire is routed first — claimed
// (a lapsed owner's sandbox taken over), or carried to the engine that owns it, or, for a cold
// acquire through the pool, to a lighter engine — and the router runs it only here; the
// instance it served is recorded in the sandbox's entry, and a refused acquire gives its
// claim up. A dispose or purge ends the entries it names wherever it landed: each entry
// another live engine owns is disposed by that engine (the call carried there), the rest here,
// and the leases of what was disposed here are released. The transport of a forward is the
// engine's ([Forwarder], [WithForwarder]): the subjects, headers and the identity a forwarded
// call carries are its API's.

// Forwarder carries a call to the engine that owns its sandbox (package service's transport).
type Forwarder interface {
	// Acquire carries the acquire ctx belongs to, to engine, and reports whether engine took
	// it: answered it with a sandbox (err nil: the answer is the forwarder's to give) or with a
	// refusal (err). An engine that did not take it (it does not answer, or takes no forward)
	// is taken false, with why.
	Acquire(ctx context.Context, engine string) (taken bool, err error)
	// Dispose carries a dispose of key (narrowed by opts) to engine, its owner: what the owner
	// reports may remain, or, when the owner did not answer or answered an error, why
	// nothing more may be done here (unanswered).
	Dispose(ctx context.Context, engine string, key sandbox.Key, opts sandbox.DisposeOptions) (undisposed, unanswered *sandbox.DisposalFailure)
	// DisposeScope carries a purge of (scope, thread) to engine, as Dispose does.
	DisposeScope(ctx context.Context, engine, scope, thread string) (p sandbox.ScopePurge, unanswered *sandbox.DisposalFailure)
	// Balanced reports whether the acquire ctx belongs to may go to a lighter engine: one that
	// came through the pool's shared subject and was not forwarded.
	Balanced(ctx context.Context) bool
	// Forwarded reports whether the call ctx belongs to was forwarded here by another engine,
	// which sorted its entries: it is served here, as it is.
	Forwarded(ctx context.Context) bool
}

// RouteError is an acquire [Owner.Acquire] could not route: its Err is [ErrLameDuck], a
// [*TakeoverError], or the store's error when the bucket cannot be reached.
type RouteError struct{ Err error }

func (e *RouteError) Error() string { return "placement: route the acquire: " + e.Err.Error() }

func (e *RouteError) Unwrap() error { return e.Err }

// ErrForwarded is [Owner.Acquire]'s answer to an acquire the engine owning the sandbox (or a
// lighter one) answered: the [Forwarder] holds that answer.
var ErrForwarded = errors.New("placement: the acquire was answered by another engine")

// WithForwarder carries the calls [Owner.Acquire], [Owner.Dispose] and [Owner.DisposeScope]
// route to another engine through f. Without it every call is served here.
func WithForwarder(f Forwarder) OwnerOption {
	return func(o *ownerOptions) error { o.forwarder = f; return nil }
}

// Acquire is the router's acquire in a cluster (see the layer above): served here, it returns
// the router's sandbox or refusal; carried elsewhere, [ErrForwarded] or that engine's refusal.
// An acquire it cannot route fails with a [*RouteError]. The acquire counts in the engine's
// announced load while it runs.
func (ow *Owner) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	defer ow.Acquiring()()
	fwd := ow.o.forwarder
	if fwd != nil && fwd.Balanced(ctx) {
		if engine := ow.Lighter(key, spec.Kind); engine != "" {
			taken, err := fwd.Acquire(ctx, engine)
			if taken {
				return nil, answered(err)
			}
			ow.log.Debug("the lighter engine did not take the acquire; serving it here", zap.String("engine", engine), zap.Error(err))
		}
	}
	r, err := ow.Route(ctx, key, spec.Kind)
	switch {
	case err != nil:
		return nil, &RouteError{Err: err}
	case !r.Here && fwd == nil:
		return nil, fmt.Errorf("placement: %s is engine %s's, and this engine carries no forward", key, r.Engine)
	case !r.Here:
		_, err := fwd.Acquire(ctx, r.Engine)
		return nil, answered(err)
	}
	sb, err := ow.router.Acquire(ctx, key, spec)
	if err != nil {
		ow.Abandon(r)
		return nil, err
	}
	ow.RecordInstance(ctx, key, spec.Kind, sb.InstanceID())
	return sb, nil
}

// answered is a forwarded acquire's outcome: the owner's refusal, or ErrForwarded.
func answered(err error) error {
	if err == nil {
		return ErrForwarded
	}
	return err
}

// Dispose is the router's dispose in a cluster (see the layer above). It reports what may
// remain, folded, and whether the dispose ran here too: not when a live owner did not answer
// (nothing here is touched before it does), nor when the one kind asked was another engine's.
func (ow *Owner) Dispose(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) (f *sandbox.DisposalFailure, here bool) {
	var failures []sandbox.DisposalFailure
	if ow.sorts(ctx) {
		owned, err := ow.ClaimKeyEntries(ctx, key, opts.Kind)
		if err != nil {
			return notDisposed(err), false
		}
		for _, e := range owned {
			one := opts
			one.Kind = &e.Kind
			undisposed, unanswered := ow.o.forwarder.Dispose(ctx, e.Record.Engine, key, one)
			if unanswered != nil {
				return sandbox.FoldDisposalFailures(append(failures, *unanswered)), false
			}
			if undisposed != nil {
				failures = append(failures, *undisposed)
			}
		}
		if opts.Kind != nil && len(owned) > 0 {
			return sandbox.FoldDisposalFailures(failures), false
		}
	}
	if f := ow.router.Dispose(ctx, key, opts); f != nil {
		failures = append(failures, *f)
	} else {
		ow.Release(ctx, func(k sandbox.Key, kind string) bool { return k == key && (opts.Kind == nil || kind == *opts.Kind) })
	}
	return sandbox.FoldDisposalFailures(failures), true
}

// DisposeScope is the router's purge of (scope, thread) in a cluster: the purge goes, as it
// is, to every other live owner of one of the conversation's sandboxes, then runs here. It
// reports what was disposed and may remain, and whether the purge ran here (not when an owner
// did not answer).
func (ow *Owner) DisposeScope(ctx context.Context, scope, thread string) (p sandbox.ScopePurge, here bool) {
	var failures []sandbox.DisposalFailure
	disposed := 0
	if ow.sorts(ctx) {
		owned, err := ow.ClaimScopeEntries(ctx, scope, thread)
		if err != nil {
			return sandbox.ScopePurge{Undisposed: notDisposed(err)}, false
		}
		done := map[string]bool{}
		for _, e := range owned {
			owner := e.Record.Engine
			if done[owner] {
				continue
			}
			done[owner] = true
			theirs, unanswered := ow.o.forwarder.DisposeScope(ctx, owner, scope, thread)
			if unanswered != nil {
				return sandbox.ScopePurge{Disposed: disposed, Undisposed: sandbox.FoldDisposalFailures(append(failures, *unanswered))}, false
			}
			disposed += theirs.Disposed
			if theirs.Undisposed != nil {
				failures = append(failures, *theirs.Undisposed)
			}
		}
	}
	mine := ow.router.DisposeScope(ctx, scope, thread)
	if mine.Undisposed != nil {
		failures = append(failures, *mine.Undisposed)
	} else {
		ow.Release(ctx, func(k sandbox.Key, _ string) bool { return k.Scope == scope && k.ThreadID == thread })
	}
	return sandbox.ScopePurge{Disposed: disposed + mine.Disposed, Undisposed: sandbox.FoldDisposalFailures(failures)}, true
}

// sorts reports whether this engine sorts the entries a dispose or purge under ctx names:
// with placement and a forwarder, for a call no other engine forwarded here.
func (ow *Owner) sorts(ctx context.Context) bool {
	return ow.Placed() && ow.o.forwarder != nil && !ow.o.forwarder.Forwarded(ctx)
}

// notDisposed is the failure of a call that stopped before it disposed anything, because the
// entries it names could not be read or taken over.
func notDisposed(err error) *sandbox.DisposalFailure {
	return &sandbox.DisposalFailure{Code: sandbox.DisposalUnreachable, Detail: fmt.Sprintf("nothing was disposed: %v", err)}
}
