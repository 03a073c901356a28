package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// The audit stream: one event per act of the engine (docs/events.md, "The audit stream").
// Every audit event has the one shape [AuditEvent]; its Type says which act, and the part of
// the payload named for its family (Acquire, Exec, File, Disposal, Placement) carries that
// act's detail.

// Audit event types. The type is also the subject's last two tokens.
const (
	AuditSandboxAcquired  = "sandbox.acquired" // served (created, reused, …) or refused
	AuditSandboxDisposed  = "sandbox.disposed"
	AuditSandboxReset     = "sandbox.reset" // the instance replaced
	AuditScopePurged      = "scope.purged"
	AuditExecFinished     = "exec.finished" // a command, code or a host-tools program, ended or refused
	AuditFileWritten      = "file.written"  // a file crossed into the sandbox
	AuditFileRead         = "file.read"     // a file crossed out of the sandbox
	AuditFileRefused      = "file.refused"  // a crossing refused: confinement refusals are here
	AuditFingerprint      = "fingerprint.verdict"
	AuditPlacementChanged = "placement.changed" // claimed, taken over, lost, lame duck
	AuditEngineStarted    = "engine.started"
	AuditEngineDraining   = "engine.draining"
	AuditEngineStopped    = "engine.stopped"
	AuditDaemonAway       = "engine.daemon_unreachable" // error: the code the daemon's probe failed with
	AuditDaemonBack       = "engine.daemon_back"
	AuditCallRefused      = "call.refused" // a call the API refused before it reached the engine (tenancy)
)

const (
	// SchemaAudit is the "schema" of every audit event.
	SchemaAudit = "maf.sandbox.audit/v2"
	// TypeAuditPrefix prefixes the Maf-Event-Type header: "audit.exec.finished.v2".
	typeAuditT = "audit.%s.v2"
	// SubjectAuditT is <prefix>.audit.<Token(scope)>.<Token(kind)>.<type>; an event of no
	// scope (the engine's own) has "_" for both, which no scope's token can be.
	SubjectAuditT = "%s.audit.%s.%s.%s"
	// SubjectAudit subscribes to every audit event under the default prefix.
	SubjectAudit = DefaultSubjectPrefix + ".audit.>"
	// StreamAudit holds the audit stream: subjects <prefix>.audit.>.
	StreamAudit = "MAF_SANDBOX_AUDIT"
	// DefaultAuditMaxAge is how long the audit stream keeps an event.
	DefaultAuditMaxAge = 7 * 24 * time.Hour
	// noScope is the scope and kind token of an event that has neither.
	noScope = "_"
)

// AuditEvent is the payload of every audit event (schema [SchemaAudit]). Its outcome is one
// of sandbox's: ok, refused, timeout, output_limit, or an acquire's created, reused,
// restarted, adopted, reset or replaced.
type AuditEvent struct {
	Schema string    `json:"schema"`
	ID     string    `json:"id"` // one per act ([AuditID]): the publish's retries carry it unchanged
	Type   string    `json:"type"`
	Time   time.Time `json:"time"`
	// Engine is the Docker daemon's ID; Service the engine process's ID on the API.
	Engine  string `json:"engine"`
	Service string `json:"service,omitempty"`
	Backend string `json:"backend"`
	// The sandbox the act concerns, when it concerns one.
	Key        *messages.APIKey `json:"key,omitempty"`
	Kind       string           `json:"kind,omitempty"`
	Sandbox    string           `json:"sandbox,omitempty"` // the API handle
	InstanceID string           `json:"instance_id,omitempty"`
	// Account is the caller's NATS account, on an engine serving several tenants.
	Account string `json:"account,omitempty"`
	// The call that caused it: its request ID (the client's, or minted) and W3C traceparent.
	RequestID   string `json:"request_id,omitempty"`
	Traceparent string `json:"traceparent,omitempty"`
	// Outcome says how it ended; Error is the wire code of a refusal (never its sentence,
	// which may quote guest text).
	Outcome    string  `json:"outcome"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`

	Acquire   *AuditAcquire   `json:"acquire,omitempty"`
	Exec      *AuditExec      `json:"exec,omitempty"`
	File      *AuditFile      `json:"file,omitempty"`
	Disposal  *AuditDisposal  `json:"disposal,omitempty"`
	Verdict   *AuditVerdict   `json:"verdict,omitempty"`
	Placement *AuditPlacement `json:"placement,omitempty"`
	Call      *AuditCall      `json:"call,omitempty"`
	Process   *AuditProcess   `json:"process,omitempty"`   // process.started, process.exited (process_audit.go)
	Lifecycle *AuditLifecycle `json:"lifecycle,omitempty"` // lifecycle.go
}

// AuditAcquire is an acquire's detail.
type AuditAcquire struct {
	Image   string `json:"image,omitempty"`    // as the spec names it
	ImageID string `json:"image_id,omitempty"` // the image the instance runs, as the daemon reports it
	Egress  string `json:"egress,omitempty"`
	// Untrusted is the instance found that this engine never handed out (another process's,
	// or its own before a restart), which the outcome says it reset or replaced.
	Untrusted string `json:"untrusted_instance,omitempty"`
}

// AuditExec is a command's detail. The command's text is never carried (it may hold
// secrets): Argv0 (the program, at most 120 bytes; "" for a shell line, code or a program)
// and the SHA-256 of the whole command identify it.
type AuditExec struct {
	Argv0         string `json:"argv0,omitempty"`
	Form          string `json:"form"`           // argv, shell, code or program
	CommandSHA256 string `json:"command_sha256"` // of the argv's JSON array, the shell line, the code or the program's source
	ExitCode      *int   `json:"exit_code,omitempty"`
	StdoutBytes   int64  `json:"stdout_bytes"`
	StderrBytes   int64  `json:"stderr_bytes"`
	// NotStarted is the cause when the runtime could not start the command's process: nothing
	// ran, and ExitCode is the 126 or 127 reported for it.
	NotStarted string `json:"not_started,omitempty"`
}

// AuditFile is a file crossing's detail: the guest path as asked, the size and SHA-256 of
// what crossed (none when refused).
type AuditFile struct {
	Direction string `json:"direction"` // in or out
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256,omitempty"`
}

// AuditDisposal is a disposal's or purge's detail.
type AuditDisposal struct {
	Disposed   int    `json:"disposed"`             // sandboxes removed (a purge's count)
	Undisposed string `json:"undisposed,omitempty"` // the failure's code when something remains
}

// AuditVerdict is a fingerprint comparison's detail.
type AuditVerdict struct {
	Phase   string `json:"phase"`             // baseline or final
	Verdict string `json:"verdict,omitempty"` // the final comparison's verdict
}

// AuditPlacement is a placement change or an engine state.
type AuditPlacement struct {
	Change string `json:"change"` // claimed, taken_over, lost, lame_duck, started, draining, stopped, daemon_unreachable, daemon_back
	Detail string `json:"detail,omitempty"`
}

// AuditCall is a refused call's detail: the operation it named.
type AuditCall struct {
	Op string `json:"op"`
}

// AuditID is the ID of one act's audit event: "aud_" and 40 hex digits of SHA-256 over the
// engine, the caller's account ("" for the engine's own acts and a single-tenant engine) and
// act, a token minted for that act alone. [AuditSink.Record] mints the token once per event,
// so every retry of the event's publish carries the one ID (the stream's duplicate window drops
// a publish repeated after a lost acknowledgement), while no two acts share an ID whatever
// request ID their calls carried, and no caller chooses an input that would let it take the ID
// of another's act. The request ID is a correlation field of the event, nothing more.
func AuditID(engine, account, act string) string {
	sum := sha256.Sum256([]byte(engine + "\x00" + account + "\x00" + act))
	return "aud_" + hex.EncodeToString(sum[:20])
}

// AuditSubject is the subject of an audit event of typ for scope and kind under prefix;
// empty scope and kind are the "_" token.
func AuditSubject(prefix, scope, kind, typ string) string {
	s, k := noScope, noScope
	if scope != "" {
		s = Token(scope)
	}
	if kind != "" {
		k = Token(kind)
	}
	return fmt.Sprintf(SubjectAuditT, prefix, s, k, typ)
}

// AuditMessage encodes ev for prefix. [ErrInvalidEvent] for an event without a type or an ID.
func AuditMessage(prefix string, ev AuditEvent) (Message, error) {
	if err := CheckSubjectPrefix(prefix); err != nil {
		return Message{}, err
	}
	if ev.Type == "" || ev.ID == "" {
		return Message{}, fmt.Errorf("%w: audit event needs a type and an ID", ErrInvalidEvent)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return Message{}, fmt.Errorf("encode audit event: %w", err)
	}
	scope := ""
	if ev.Key != nil {
		scope = ev.Key.Scope
	}
	return Message{Subject: AuditSubject(prefix, scope, ev.Kind, ev.Type), ID: ev.ID, Type: fmt.Sprintf(typeAuditT, ev.Type), Data: data}, nil
}

// AuditSink enqueues audit events on the audit outbox: it never blocks a call. A nil
// *AuditSink records nothing, so a caller with the audit off pays one nil check.
type AuditSink struct {
	box              *Outbox
	prefix, engineID string
	log              *zap.Logger
}

// Record stamps ev (schema, engine, backend; time and, when unset, an ID of its own, [AuditID])
// and enqueues it. A full
// outbox has already said so at Error and counted it; an event that cannot be encoded is
// logged here.
func (s *AuditSink) Record(ev AuditEvent) {
	if s == nil {
		return
	}
	ev.Schema, ev.Engine, ev.Backend = SchemaAudit, s.engineID, BackendDocker
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if ev.ID == "" {
		ev.ID = AuditID(s.engineID, ev.Account, nuid.Next())
	}
	m, err := AuditMessage(s.prefix, ev)
	if err == nil {
		err = s.box.Enqueue(m)
	}
	if err != nil && !errors.Is(err, ErrOutboxFull) {
		s.log.Warn("audit event not recorded", zap.String("type", ev.Type), zap.Error(err))
	}
}

// EngineID is the daemon ID the events carry.
func (s *AuditSink) EngineID() string { return s.engineID }
