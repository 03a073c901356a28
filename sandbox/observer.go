package sandbox

import "time"

// EgressDecision is one egress enforcer verdict. Host is guest-chosen text.
type EgressDecision struct {
	Decision EgressDecisionCode
	Host     string
	Port     int
	Method   string    // the request's method, for a request an inspecting rule decided; empty for a tunnel
	Path     string    // the request's path without its query, bounded; set with Method
	At       time.Time // the engine's log time when known; zero otherwise
	TLS      string    // on a DENY of an inspected host without Method: why the workload's TLS handshake failed (egresslog.TLSSNIMismatch, …); "" otherwise

	// The rest is set only with Method: what became of the request.
	Status   int    // the status the workload was answered (403 for a refusal); 0 when none was (cut)
	BytesOut int64  // bytes of the request sent upstream, head and body; 0 when refused
	BytesIn  int64  // bytes of the upstream's response relayed to the workload, head and body
	Rule     string // the host pattern of the inspecting rule that decided
}

// EgressObserved is a window of egress decisions, reported only after the enforcer that saw
// them was removed.
type EgressObserved struct {
	Key        Key
	Backend    string
	Decisions  []EgressDecision // in enforcer order
	Truncated  bool             // the window may hold more than was read
	Unreadable string           // why nothing could be read where something was expected
	Seconds    float64
	Call       *string // always nil: a window spans calls
}

// SandboxAcquired records one acquire, served or refused.
type SandboxAcquired struct {
	Key        Key
	Kind       string
	Backend    string
	InstanceID string
	Refusal    string // the refusal's type name; "" when served
}

// SandboxDisposed records one key's disposal.
type SandboxDisposed struct {
	Key        Key
	Undisposed *DisposalFailure
}

// ScopeDisposed records one conversation's purge.
type ScopeDisposed struct {
	Scope, ThreadID string
	Purge           ScopePurge
}

// HostToolCalled records one call of a host-tools program, delivered or refused. A refusal
// is recorded by its code only (the sentence may quote guest text).
type HostToolCalled struct {
	Key     Key
	Kind    string
	Tool    string // the name as the guest sent it, at most 120 characters; "" when not a string
	Call    int    // the run's call number, refusals included
	Refusal string // the refusal code ("cap", "unknown", …); "" when a value was delivered
	Bytes   int    // delivered bytes, framing included
	Seconds float64
}

// ProcessStarted records a process a backend started (not a start repeated under its ID).
type ProcessStarted struct {
	Key        Key
	Kind       string
	Backend    string
	InstanceID string
	Process    Process
}

// ProcessExited records a process's end, once per process: Process.Exit says how it ended
// (its reason, code and signal).
type ProcessExited struct {
	Key        Key
	Kind       string
	Backend    string
	InstanceID string
	Process    Process
}

// ProcessObserver is implemented by backends that report their processes' starts and ends
// to obs (nil: to nobody). A router with an observer ([WithObserver]) hands it to them, so
// the reports reach it as every other event does, a panic contained.
type ProcessObserver interface {
	ObserveProcesses(obs Observer)
}

// Observer receives the router's events synchronously on the calling goroutine. Embed
// [NopObserver] so that new events never break an implementation. A panicking observer is
// contained and never alters a call.
type Observer interface {
	SandboxAcquired(SandboxAcquired)
	SandboxDisposed(SandboxDisposed)
	ScopeDisposed(ScopeDisposed)
	EgressObserved(EgressObserved)
	// HostToolCalled is reported by a host-tools run given the observer
	// (hosttools.WithObserver), not by the router.
	HostToolCalled(HostToolCalled)
	// ProcessStarted and ProcessExited are reported by a backend that runs processes
	// ([ProcessObserver]), from the goroutine that saw the start or the end.
	ProcessStarted(ProcessStarted)
	ProcessExited(ProcessExited)
}

// NopObserver implements [Observer] with no-ops.
type NopObserver struct{}

// SandboxAcquired does nothing.
func (NopObserver) SandboxAcquired(SandboxAcquired) {}

// SandboxDisposed does nothing.
func (NopObserver) SandboxDisposed(SandboxDisposed) {}

// ScopeDisposed does nothing.
func (NopObserver) ScopeDisposed(ScopeDisposed) {}

// EgressObserved does nothing.
func (NopObserver) EgressObserved(EgressObserved) {}

// HostToolCalled does nothing.
func (NopObserver) HostToolCalled(HostToolCalled) {}

// ProcessStarted does nothing.
func (NopObserver) ProcessStarted(ProcessStarted) {}

// ProcessExited does nothing.
func (NopObserver) ProcessExited(ProcessExited) {}
