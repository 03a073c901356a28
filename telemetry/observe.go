package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Metrics observes the engine's acts (sandbox.Observer) as the events do, so that an embedded
// worker and engine serve count the same things: hand it to the router with the events
// (sandbox.WithObserver(sandbox.Observers(ev, m))). It counts acquires by kind and outcome,
// times every command, counts the egress decisions of every window observed and the placement
// leases claimed, taken over and lost. A nil *Metrics counts nothing.
var _ sandbox.Observer = (*Metrics)(nil)

// SandboxAcquired counts one acquire of its kind (bounded: labels.go) by outcome, a refusal
// with its code.
func (m *Metrics) SandboxAcquired(ctx context.Context, a sandbox.SandboxAcquired) {
	if m == nil {
		return
	}
	outcome := a.Outcome
	if a.Err != nil {
		outcome = sandbox.OutcomeRefused
	}
	m.acquires.Add(ctx, 1, metric.WithAttributes(m.actAttrs(a.Act, outcome)...))
}

// ExecFinished records one command's duration by kind and outcome.
func (m *Metrics) ExecFinished(ctx context.Context, a sandbox.ExecFinished) {
	if m == nil {
		return
	}
	m.execs.Record(ctx, a.Took.Seconds(), metric.WithAttributes(m.actAttrs(a.Act, sandbox.ActOutcome(a.Err))...))
}

// EgressObserved counts a window's decisions by code, under its sandbox's scope (bounded).
func (m *Metrics) EgressObserved(ctx context.Context, w sandbox.EgressWindow) {
	if m == nil || len(w.Decisions) == 0 {
		return
	}
	counts := map[string]int64{}
	for _, d := range w.Decisions {
		counts[string(d.Decision)]++
	}
	scope := m.scopes.value(w.Key.Scope)
	for decision, n := range counts {
		m.egress.Add(ctx, n, metric.WithAttributes(KeyScope.String(scope), KeyDecision.String(decision)))
	}
}

// PlacementChanged counts a lease claimed, taken over or lost.
func (m *Metrics) PlacementChanged(ctx context.Context, a sandbox.PlacementChanged) {
	if m == nil {
		return
	}
	switch a.Change {
	case sandbox.PlacementClaimed, sandbox.PlacementTakenOver, sandbox.PlacementLost:
		m.leases.Add(ctx, 1, metric.WithAttributes(KeyChange.String(a.Change)))
	}
}

// actAttrs are an act's attributes: its kind (bounded), its outcome and, when refused, its
// code.
func (m *Metrics) actAttrs(a sandbox.Act, outcome string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{KeyKind.String(m.kinds.value(a.Kind)), KeyOutcome.String(outcome)}
	if code := messages.ErrorCode(a.Err); code != "" {
		attrs = append(attrs, KeyErrorType.String(code))
	}
	return attrs
}

// The acts the metrics do not count.

// SandboxDisposed counts nothing.
func (*Metrics) SandboxDisposed(context.Context, sandbox.SandboxDisposed) {}

// ScopeDisposed counts nothing.
func (*Metrics) ScopeDisposed(context.Context, sandbox.ScopeDisposed) {}

// SandboxReset counts nothing.
func (*Metrics) SandboxReset(context.Context, sandbox.SandboxReset) {}

// FileCrossed counts nothing.
func (*Metrics) FileCrossed(context.Context, sandbox.FileCrossed) {}

// FingerprintTaken counts nothing.
func (*Metrics) FingerprintTaken(context.Context, sandbox.FingerprintTaken) {}

// EgressPending counts nothing: the window is counted once observed.
func (*Metrics) EgressPending(context.Context, sandbox.EgressWindow) {}

// ReapCompleted counts nothing.
func (*Metrics) ReapCompleted(context.Context, sandbox.ReapCompleted) {}

// HostToolCalled counts nothing.
func (*Metrics) HostToolCalled(context.Context, sandbox.HostToolCalled) {}

// EngineStateChanged counts nothing.
func (*Metrics) EngineStateChanged(context.Context, sandbox.EngineStateChanged) {}

// CallRefused counts nothing: the API's call metric counts it by its code.
func (*Metrics) CallRefused(context.Context, sandbox.CallRefused) {}
