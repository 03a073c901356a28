package events

import (
	"context"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Events is the engine's observer (sandbox.Observer): hand it to the router
// (sandbox.WithObserver), which hands it to its backends, and every act becomes its event
// where it happens — an audit event per act on the audit outbox, an egress window recorded
// pending and then published, a sweep's summary, a host-tool call on core NATS. This file is
// the one mapping from acts to events.

var _ sandbox.Observer = (*Events)(nil)

// SandboxAcquired records an acquire.
func (e *Events) SandboxAcquired(ctx context.Context, a sandbox.SandboxAcquired) {
	ev := auditOf(ctx, AuditSandboxAcquired, a.Act)
	if a.Err == nil {
		ev.Outcome = a.Outcome
	}
	ev.Acquire = &AuditAcquire{Image: a.Image, ImageID: a.ImageID, Egress: string(a.Egress), Untrusted: a.Untrusted}
	e.audit.Record(ev)
}

// SandboxDisposed records a disposal.
func (e *Events) SandboxDisposed(ctx context.Context, a sandbox.SandboxDisposed) {
	ev := auditOf(ctx, AuditSandboxDisposed, a.Act)
	ev.Disposal = &AuditDisposal{Undisposed: failureCode(a.Undisposed)}
	e.audit.Record(ev)
}

// ScopeDisposed records a conversation's purge.
func (e *Events) ScopeDisposed(ctx context.Context, a sandbox.ScopeDisposed) {
	ev := auditOf(ctx, AuditScopePurged, a.Act)
	ev.Disposal = &AuditDisposal{Disposed: a.Purge.Disposed, Undisposed: failureCode(a.Purge.Undisposed)}
	e.audit.Record(ev)
}

// SandboxReset records a reset, with the instance it replaced.
func (e *Events) SandboxReset(ctx context.Context, a sandbox.SandboxReset) {
	e.lifecycle(ctx, AuditSandboxReset, a.Act, &AuditLifecycle{Reason: a.Reason, Replaced: a.Previous})
}

// ExecFinished records a command: its digest, never its text.
func (e *Events) ExecFinished(ctx context.Context, a sandbox.ExecFinished) {
	ev := auditOf(ctx, AuditExecFinished, a.Act)
	x := &AuditExec{Argv0: a.Argv0, Form: a.Form, CommandSHA256: a.CommandSHA256, NotStarted: string(a.NotStarted)}
	if a.Err == nil {
		code := a.ExitCode
		x.ExitCode, x.StdoutBytes, x.StderrBytes = &code, a.StdoutBytes, a.StderrBytes
	}
	ev.Exec = x
	e.audit.Record(ev)
}

// maxAuditPath bounds the guest path an event carries.
const maxAuditPath = 1024

// FileCrossed records a file crossing, or its refusal.
func (e *Events) FileCrossed(ctx context.Context, a sandbox.FileCrossed) {
	typ := AuditFileWritten
	switch {
	case a.Err != nil:
		typ = AuditFileRefused
	case a.Direction == sandbox.DirectionOut:
		typ = AuditFileRead
	}
	ev := auditOf(ctx, typ, a.Act)
	ev.File = &AuditFile{Direction: a.Direction, Path: sandbox.Clip(a.Path, maxAuditPath)}
	if a.Err == nil {
		ev.File.Size, ev.File.SHA256 = a.Size, a.SHA256
	}
	e.audit.Record(ev)
}

// FingerprintTaken records a fingerprint's verdict.
func (e *Events) FingerprintTaken(ctx context.Context, a sandbox.FingerprintTaken) {
	ev := auditOf(ctx, AuditFingerprint, a.Act)
	ev.Verdict = &AuditVerdict{Phase: a.Phase, Verdict: a.Verdict}
	e.audit.Record(ev)
}

// EgressPending records a drained window as pending, before its proxy's removal.
func (e *Events) EgressPending(ctx context.Context, w sandbox.EgressWindow) {
	e.Windows().EgressPending(ctx, w)
}

// EgressObserved publishes a window whose proxy is gone.
func (e *Events) EgressObserved(ctx context.Context, w sandbox.EgressWindow) {
	e.Windows().EgressObserved(ctx, w)
}

// ReapCompleted publishes a sweep's summary; a dry run's is none.
func (e *Events) ReapCompleted(ctx context.Context, a sandbox.ReapCompleted) {
	if a.Result.DryRun {
		return
	}
	_, _ = e.Reaps().Publish(ctx, a.Result) // the sink logs what it could not take
}

// HostToolCalled publishes a host-tool call on core NATS.
func (e *Events) HostToolCalled(ctx context.Context, a sandbox.HostToolCalled) {
	c := sandbox.CallOf(ctx)
	e.HostTools().HostToolCalled(HostToolCalledEvent{Engine: e.engineID, Service: c.Service, Backend: BackendDocker,
		Key: *messages.KeyToWire(a.Key), Kind: a.Kind, RunDir: a.RunDir, Tool: a.Tool, Call: a.Call, Refusal: a.Refusal,
		Bytes: a.Bytes, Seconds: a.Took.Seconds()})
}

// PlacementChanged records a placement change.
func (e *Events) PlacementChanged(ctx context.Context, a sandbox.PlacementChanged) {
	ev := auditOf(ctx, AuditPlacementChanged, a.Act)
	ev.Placement = &AuditPlacement{Change: a.Change, Detail: a.Detail}
	e.audit.Record(ev)
}

// engineStates are the audit types of the engine's states.
var engineStates = map[string]string{
	sandbox.EngineStarted: AuditEngineStarted, sandbox.EngineDraining: AuditEngineDraining, sandbox.EngineStopped: AuditEngineStopped,
	sandbox.EngineDaemonUnreachable: AuditDaemonAway, sandbox.EngineDaemonBack: AuditDaemonBack,
}

// EngineStateChanged records a state of the engine: done, whatever the probe met (its code).
func (e *Events) EngineStateChanged(ctx context.Context, a sandbox.EngineStateChanged) {
	typ, ok := engineStates[a.State]
	if !ok {
		return
	}
	ev := auditOf(ctx, typ, a.Act)
	ev.Outcome = sandbox.OutcomeOK
	ev.Placement = &AuditPlacement{Change: a.State}
	e.audit.Record(ev)
}

// CallRefused records a call the API refused before it reached the engine, on the engine's
// own subject: the sandbox it named is not the caller's to write events about.
func (e *Events) CallRefused(ctx context.Context, a sandbox.CallRefused) {
	a.Key, a.Kind, a.InstanceID = sandbox.Key{}, "", ""
	ev := auditOf(ctx, AuditCallRefused, a.Act)
	ev.Sandbox = ""
	ev.Call = &AuditCall{Op: a.Op}
	e.audit.Record(ev)
}

// auditOf is the audit event of type typ for the act a, with what the call under ctx knew of
// it (sandbox.CallOf): its request ID, trace, account, API engine and handle.
func auditOf(ctx context.Context, typ string, a sandbox.Act) AuditEvent {
	c := sandbox.CallOf(ctx)
	ev := AuditEvent{Type: typ, Kind: a.Kind, InstanceID: a.InstanceID, Service: c.Service, Account: c.Account,
		RequestID: c.RequestID, Traceparent: c.Traceparent, Outcome: sandbox.ActOutcome(a.Err), Error: messages.ErrorCode(a.Err),
		DurationMS: float64(a.Took) / float64(time.Millisecond)}
	if a.Key != (sandbox.Key{}) {
		ev.Key = messages.KeyToWire(a.Key)
	}
	if c.Handle != nil && a.InstanceID != "" {
		ev.Sandbox = c.Handle(a.InstanceID)
	}
	return ev
}

func failureCode(f *sandbox.DisposalFailure) string {
	if f == nil {
		return ""
	}
	return string(f.Code)
}
