package sandbox

import (
	"context"

	"go.uber.org/zap"
)

// NopObserver implements [Observer] with no-ops: embed it so that a new act never breaks an
// observer.
type NopObserver struct{}

// SandboxAcquired does nothing.
func (NopObserver) SandboxAcquired(context.Context, SandboxAcquired) {}

// SandboxDisposed does nothing.
func (NopObserver) SandboxDisposed(context.Context, SandboxDisposed) {}

// ScopeDisposed does nothing.
func (NopObserver) ScopeDisposed(context.Context, ScopeDisposed) {}

// SandboxReset does nothing.
func (NopObserver) SandboxReset(context.Context, SandboxReset) {}

// ExecFinished does nothing.
func (NopObserver) ExecFinished(context.Context, ExecFinished) {}

// FileCrossed does nothing.
func (NopObserver) FileCrossed(context.Context, FileCrossed) {}

// FingerprintTaken does nothing.
func (NopObserver) FingerprintTaken(context.Context, FingerprintTaken) {}

// EgressPending does nothing.
func (NopObserver) EgressPending(context.Context, EgressWindow) {}

// EgressObserved does nothing.
func (NopObserver) EgressObserved(context.Context, EgressWindow) {}

// ReapCompleted does nothing.
func (NopObserver) ReapCompleted(context.Context, ReapCompleted) {}

// HostToolCalled does nothing.
func (NopObserver) HostToolCalled(context.Context, HostToolCalled) {}

// PlacementChanged does nothing.
func (NopObserver) PlacementChanged(context.Context, PlacementChanged) {}

// EngineStateChanged does nothing.
func (NopObserver) EngineStateChanged(context.Context, EngineStateChanged) {}

// CallRefused does nothing.
func (NopObserver) CallRefused(context.Context, CallRefused) {}

// Observers is one observer that hands each act to every one of obs in turn; nil ones are
// skipped. Nil when none is left.
func Observers(obs ...Observer) Observer {
	var set observerSet
	for _, o := range obs {
		if o != nil {
			set = append(set, o)
		}
	}
	switch len(set) {
	case 0:
		return nil
	case 1:
		return set[0]
	}
	return set
}

type observerSet []Observer

func (s observerSet) SandboxAcquired(ctx context.Context, a SandboxAcquired) {
	for _, o := range s {
		o.SandboxAcquired(ctx, a)
	}
}

func (s observerSet) SandboxDisposed(ctx context.Context, a SandboxDisposed) {
	for _, o := range s {
		o.SandboxDisposed(ctx, a)
	}
}

func (s observerSet) ScopeDisposed(ctx context.Context, a ScopeDisposed) {
	for _, o := range s {
		o.ScopeDisposed(ctx, a)
	}
}

func (s observerSet) SandboxReset(ctx context.Context, a SandboxReset) {
	for _, o := range s {
		o.SandboxReset(ctx, a)
	}
}

func (s observerSet) ExecFinished(ctx context.Context, a ExecFinished) {
	for _, o := range s {
		o.ExecFinished(ctx, a)
	}
}

func (s observerSet) FileCrossed(ctx context.Context, a FileCrossed) {
	for _, o := range s {
		o.FileCrossed(ctx, a)
	}
}

func (s observerSet) FingerprintTaken(ctx context.Context, a FingerprintTaken) {
	for _, o := range s {
		o.FingerprintTaken(ctx, a)
	}
}

func (s observerSet) EgressPending(ctx context.Context, a EgressWindow) {
	for _, o := range s {
		o.EgressPending(ctx, a)
	}
}

func (s observerSet) EgressObserved(ctx context.Context, a EgressWindow) {
	for _, o := range s {
		o.EgressObserved(ctx, a)
	}
}

func (s observerSet) ReapCompleted(ctx context.Context, a ReapCompleted) {
	for _, o := range s {
		o.ReapCompleted(ctx, a)
	}
}

func (s observerSet) HostToolCalled(ctx context.Context, a HostToolCalled) {
	for _, o := range s {
		o.HostToolCalled(ctx, a)
	}
}

func (s observerSet) PlacementChanged(ctx context.Context, a PlacementChanged) {
	for _, o := range s {
		o.PlacementChanged(ctx, a)
	}
}

func (s observerSet) EngineStateChanged(ctx context.Context, a EngineStateChanged) {
	for _, o := range s {
		o.EngineStateChanged(ctx, a)
	}
}

func (s observerSet) CallRefused(ctx context.Context, a CallRefused) {
	for _, o := range s {
		o.CallRefused(ctx, a)
	}
}

// guarded contains its observer's panics: an act is logged and dropped, the call goes on.
type guarded struct {
	obs Observer
	log *zap.Logger
}

// guard returns obs guarded, nil for nil.
func guard(obs Observer, log *zap.Logger) Observer {
	switch obs.(type) {
	case nil:
		return nil
	case guarded:
		return obs
	}
	return guarded{obs: obs, log: log}
}

func (g guarded) contain(act string) {
	if p := recover(); p != nil {
		g.log.Warn("observer panicked", zap.String("act", act), zap.Any("panic", p))
	}
}

func (g guarded) SandboxAcquired(ctx context.Context, a SandboxAcquired) {
	defer g.contain("SandboxAcquired")
	g.obs.SandboxAcquired(ctx, a)
}

func (g guarded) SandboxDisposed(ctx context.Context, a SandboxDisposed) {
	defer g.contain("SandboxDisposed")
	g.obs.SandboxDisposed(ctx, a)
}

func (g guarded) ScopeDisposed(ctx context.Context, a ScopeDisposed) {
	defer g.contain("ScopeDisposed")
	g.obs.ScopeDisposed(ctx, a)
}

func (g guarded) SandboxReset(ctx context.Context, a SandboxReset) {
	defer g.contain("SandboxReset")
	g.obs.SandboxReset(ctx, a)
}

func (g guarded) ExecFinished(ctx context.Context, a ExecFinished) {
	defer g.contain("ExecFinished")
	g.obs.ExecFinished(ctx, a)
}

func (g guarded) FileCrossed(ctx context.Context, a FileCrossed) {
	defer g.contain("FileCrossed")
	g.obs.FileCrossed(ctx, a)
}

func (g guarded) FingerprintTaken(ctx context.Context, a FingerprintTaken) {
	defer g.contain("FingerprintTaken")
	g.obs.FingerprintTaken(ctx, a)
}

func (g guarded) EgressPending(ctx context.Context, a EgressWindow) {
	defer g.contain("EgressPending")
	g.obs.EgressPending(ctx, a)
}

func (g guarded) EgressObserved(ctx context.Context, a EgressWindow) {
	defer g.contain("EgressObserved")
	g.obs.EgressObserved(ctx, a)
}

func (g guarded) ReapCompleted(ctx context.Context, a ReapCompleted) {
	defer g.contain("ReapCompleted")
	g.obs.ReapCompleted(ctx, a)
}

func (g guarded) HostToolCalled(ctx context.Context, a HostToolCalled) {
	defer g.contain("HostToolCalled")
	g.obs.HostToolCalled(ctx, a)
}

func (g guarded) PlacementChanged(ctx context.Context, a PlacementChanged) {
	defer g.contain("PlacementChanged")
	g.obs.PlacementChanged(ctx, a)
}

func (g guarded) EngineStateChanged(ctx context.Context, a EngineStateChanged) {
	defer g.contain("EngineStateChanged")
	g.obs.EngineStateChanged(ctx, a)
}

func (g guarded) CallRefused(ctx context.Context, a CallRefused) {
	defer g.contain("CallRefused")
	g.obs.CallRefused(ctx, a)
}
