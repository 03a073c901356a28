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

// How an enforcer's window was removed, as [EgressWindow.Removal] names it.
const (
	RemovalRemoved = "removed" // the drainer removed the enforcer
	RemovalAbsent  = "absent"  // someone else removed it first
)

// EgressWindow is one egress enforcer's window: the decisions one enforcer (the Docker
// backend's proxy container) made between its creation and its drain, the key that ran behind
// it, and how it ended. A backend reports it to its observer twice: drained, before the
// enforcer's removal ([Observer.EgressPending], Removal ""), and once that removal succeeded
// or found the enforcer absent ([Observer.EgressObserved]); never after a failed or cancelled
// removal, so a window is reported observed only once its enforcer is gone (§12.3).
type EgressWindow struct {
	Key     Key
	Kind    string // the enforcer's kind label value
	Backend string
	// ProxyID is the enforcer's ID as inspected (the Docker proxy container's 64 hex), the
	// ID that was read and removed; ProxyName its name.
	ProxyID, ProxyName string
	// Attribution says how Key was recovered: label, legacy-selectors or caller-key
	// (egresslog.Attribution); a window that is not attributed is never reported observed.
	Attribution  string
	PrivateCIDRs string    // the private destinations the enforcer was allowed, comma-separated
	Start        time.Time // when the enforcer started; zero when unknown
	End          time.Time // when its stop completed, or its log was read
	Closed       bool      // false exactly when the stop failed and decisions may be missing
	Decisions    []EgressDecision
	Truncated    bool   // the window may hold more than was read (a bound was reached)
	Unreadable   string // why the window could not be fully accounted for
	Trigger      string // what removed the enforcer (egresslog.Trigger)
	Removal      string // RemovalRemoved or RemovalAbsent; "" while pending
	DrainSeconds float64
}
