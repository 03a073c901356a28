package service

import (
	"context"
	"errors"
	"time"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The audit stream (docs/events.md): each call that is an act of the engine — an acquire, a
// disposal, a purge, a command, a file crossing, a reset, a fingerprint — becomes one audit
// event once answered. The call's envelope gives the key and handle, the handler adds what
// only it knows (the command's digest, the path), and the answer gives the outcome. A call
// another engine answered (forwarded by placement) is that engine's to record.

// auditType is the audit event an operation's call becomes; "" for a call that is no act
// (reads of state, chunks of a transfer, health).
func auditType(op string) string {
	switch op {
	case "acquire":
		return events.AuditSandboxAcquired
	case "dispose":
		return events.AuditSandboxDisposed
	case "dispose_scope":
		return events.AuditScopePurged
	case "exec", "run_code", "run_program":
		return events.AuditExecFinished
	case "write_file":
		return events.AuditFileWritten
	case "read_file":
		return events.AuditFileRead
	case "reset":
		return events.AuditSandboxReset
	case "fingerprint":
		return events.AuditFingerprint
	}
	return ""
}

// auditStart opens the call's audit event when the audit is on and the operation is an act,
// with what the envelope says.
func (s *Service) auditStart(c *call, env *messages.APIEnvelope) {
	typ := auditType(c.op.name)
	if s.o.audit == nil || typ == "" {
		return
	}
	a := &events.AuditEvent{Type: typ, Sandbox: env.Sandbox, Service: s.id}
	if env.Key != nil {
		a.Key = &events.EventKey{Scope: env.Key.Scope, ThreadID: env.Key.ThreadID, AgentID: env.Key.AgentID, CallID: env.Key.CallID}
	}
	if env.Sandbox != "" {
		if h := s.handles.get(env.Sandbox); h != nil {
			a.Kind, a.InstanceID = h.kind, h.instanceID()
		}
	}
	c.audit = a
}

// auditOf is the audit event of the call ctx belongs to, for its handler to add to; nil when
// the call records none.
func auditOf(ctx context.Context) *events.AuditEvent {
	if c := callOf(ctx); c != nil {
		return c.audit
	}
	return nil
}

// forwarded drops the call's audit event: the engine the call was forwarded to records it.
func forwarded(ctx context.Context) {
	if c := callOf(ctx); c != nil {
		c.audit = nil
	}
}

// auditFinish records the call's audit event with the answer's outcome.
func (s *Service) auditFinish(c *call, resp any, err error) {
	a := c.audit
	if a == nil {
		return
	}
	a.RequestID, a.Traceparent = c.requestID, c.traceparent
	a.DurationMS = float64(time.Since(c.start)) / float64(time.Millisecond)
	if c.identity != nil {
		a.Account = c.identity.Account // tenancy.go
	}
	var fe *messages.ForbiddenError
	if errors.As(err, &fe) {
		// A call refused by tenancy is the operator's to see, not the tenant it named: without
		// its key it goes to the engine's own subject, so no tenant can write into another's
		// audit subjects by naming its scope.
		a.Key, a.Kind, a.Sandbox, a.InstanceID = nil, "", "", ""
	}
	if err != nil {
		a.Outcome, a.Error = refusalOutcome(err), messages.EncodeError(err).Code
		if a.File != nil {
			a.Type = events.AuditFileRefused
			a.File.Size, a.File.SHA256 = 0, ""
		}
		if a.Exec != nil && a.Outcome == events.OutcomeRefused {
			a.Exec.ExitCode = nil
		}
	} else {
		auditAnswer(a, resp)
	}
	s.o.audit.Record(*a)
}

// refusalOutcome names how a call that failed ended: a command's timeout and output cap are
// outcomes of their own.
func refusalOutcome(err error) string {
	var te *sandbox.TimeoutError
	var oe *sandbox.ExecOutputLimitExceededError
	switch {
	case errors.As(err, &te):
		return events.OutcomeTimeout
	case errors.As(err, &oe):
		return events.OutcomeOutputLimit
	}
	return events.OutcomeRefused
}

// auditAnswer fills a from a served call's answer.
func auditAnswer(a *events.AuditEvent, resp any) {
	if a.Outcome == "" {
		a.Outcome = events.OutcomeOK
	}
	switch r := resp.(type) {
	case *messages.APIAcquireResponse:
		a.Kind, a.InstanceID, a.Sandbox = r.Sandbox.Kind, r.Sandbox.InstanceID, r.Sandbox.ID
		if a.Outcome != events.OutcomeOK {
			break // the backend said how it got the instance (auditAcquired)
		}
		a.Outcome = events.OutcomeReused
		if r.Sandbox.Created {
			a.Outcome = events.OutcomeCreated
		}
	case *messages.APIExecResponse:
		auditExecResult(a, &r.APIExecResult)
	case *messages.APIRunCodeResponse:
		auditExecResult(a, &r.APIExecResult)
	case *messages.APIRunProgramResponse:
		if a.Exec != nil {
			code := r.ExitCode
			a.Exec.ExitCode, a.Exec.StdoutBytes = &code, int(r.Output.Size)
		}
	case *messages.APIReadFileResponse:
		if a.File != nil {
			a.File.Size, a.File.SHA256 = r.Content.Size, r.Content.SHA256
		}
	case *messages.APIDisposeResponse:
		a.Disposal = &events.AuditDisposal{Undisposed: failureCode(r.Undisposed)}
	case *messages.APIDisposeScopeResponse:
		a.Disposal = &events.AuditDisposal{Disposed: r.Disposed, Undisposed: failureCode(r.Undisposed)}
	case *messages.APIResetResponse:
		a.InstanceID = r.InstanceID
	case *messages.APIFingerprintResponse:
		a.Verdict = &events.AuditVerdict{Phase: r.Phase}
		switch {
		case r.Skipped:
			a.Verdict.Verdict = "skipped"
		case r.Comparison == nil:
		case r.Passed:
			a.Verdict.Verdict = "clean"
		default:
			a.Verdict.Verdict = "changed"
		}
	}
}

func auditExecResult(a *events.AuditEvent, r *messages.APIExecResult) {
	if a.Exec == nil {
		return
	}
	code := r.ExitCode
	a.Exec.ExitCode = &code
	a.Exec.StdoutBytes, a.Exec.StderrBytes = int(r.Stdout.Size), int(r.Stderr.Size)
	a.Exec.NotStarted = r.NotStarted
}

func failureCode(f *messages.APIDisposalFailure) string {
	if f == nil {
		return ""
	}
	return f.Code
}

// auditCommand notes a command's form and digest (never its text) on the call's event.
func auditCommand(ctx context.Context, argv []string, text, form string) {
	a := auditOf(ctx)
	if a == nil {
		return
	}
	e := &events.AuditExec{Form: form, CommandSHA256: events.CommandSHA256(argv, text)}
	if len(argv) > 0 {
		e.Argv0 = clip(argv[0], 120)
	}
	a.Exec = e
}

// auditFile notes a file crossing's direction and guest path (and, for a write, what crossed).
func auditFile(ctx context.Context, direction, path string, content []byte, sha string) {
	a := auditOf(ctx)
	if a == nil {
		return
	}
	a.File = &events.AuditFile{Direction: direction, Path: clip(path, 1024), Size: int64(len(content)), SHA256: sha}
	if content != nil && sha == "" {
		a.File.SHA256 = sha256Hex(content)
	}
}

// auditAcquire notes an acquire's spec.
func auditAcquire(ctx context.Context, spec sandbox.Spec) {
	if a := auditOf(ctx); a != nil {
		a.Kind = spec.Kind
		a.Acquire = &events.AuditAcquire{Image: spec.Image, Egress: string(spec.Egress)}
	}
}

// auditAcquired notes how the backend got the instance it handed out and its image, when the
// sandbox says (sandbox.Acquired), and an untrusted instance the router reset or replaced
// (rep), which outranks the backend's word: the backend saw only its own acquire.
func auditAcquired(ctx context.Context, sb sandbox.Sandbox, rep *sandbox.AcquireReport) {
	a := auditOf(ctx)
	if a == nil {
		return
	}
	if r, ok := sb.(sandbox.Acquired); ok && r.AcquireOutcome() != "" {
		a.Outcome = r.AcquireOutcome()
		if a.Acquire != nil {
			a.Acquire.ImageID = r.ImageID()
		}
	}
	if rep != nil && rep.Untrusted != "" {
		a.Outcome = rep.Outcome
		if a.Acquire != nil {
			a.Acquire.Untrusted = rep.Untrusted
		}
	}
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !runeStart(s[n]) {
		n--
	}
	return s[:n]
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// auditEngine records an act of the engine itself (started, draining, stopped, lame duck) or
// of its placement for one sandbox (a lease lost), not caused by a call.
func (s *Service) auditEngine(typ, change string, key *sandbox.Key, kind string) {
	if s.o.audit == nil {
		return
	}
	a := events.AuditEvent{Type: typ, Service: s.id, Kind: kind, Outcome: events.OutcomeOK,
		Placement: &events.AuditPlacement{Change: change}}
	if key != nil {
		a.Key = &events.EventKey{Scope: key.Scope, ThreadID: key.ThreadID, AgentID: key.AgentID, CallID: key.CallID}
	}
	s.o.audit.Record(a)
}

// auditClaim notes on the acquire's event that this engine claimed the sandbox's placement,
// or took it over from a lapsed owner.
func auditClaim(ctx context.Context, takenFrom string) {
	a := auditOf(ctx)
	if a == nil {
		return
	}
	a.Placement = &events.AuditPlacement{Change: "claimed"}
	if takenFrom != "" {
		a.Placement = &events.AuditPlacement{Change: "taken_over", Detail: "from engine " + takenFrom}
	}
}

// daemonState records the daemon's answer to a probe, and an audit event when it changed:
// the daemon went away (with the failure's code) or came back.
func (s *Service) daemonState(reachable bool, code string) {
	if s.o.audit == nil || s.daemonDown.Swap(!reachable) == !reachable {
		return
	}
	typ, change := events.AuditDaemonBack, "daemon_back"
	if !reachable {
		typ, change = events.AuditDaemonAway, "daemon_unreachable"
	}
	s.o.audit.Record(events.AuditEvent{Type: typ, Service: s.id, Outcome: events.OutcomeOK, Error: code,
		Placement: &events.AuditPlacement{Change: change}})
}
