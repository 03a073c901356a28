package egresslog

import (
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// A drained window is what the drain hands the engine's egress sink: the decisions a proxy
// logged, whose key they were, and how the proxy ended. Package events turns it into an event
// (events.EgressEvent); building and delivering events is not this package's.

// Trigger names the cleanup path that removed a proxy.
type Trigger string

// Triggers, as the "trigger" field spells them.
const (
	TriggerAcquire        Trigger = "acquire"
	TriggerDispose        Trigger = "dispose"
	TriggerDisposeScope   Trigger = "dispose_scope"
	TriggerReap           Trigger = "reap"
	TriggerSetupFailure   Trigger = "setup_failure"
	TriggerTopologyRepair Trigger = "topology_repair"
)

// Removal outcomes a window's event carries (the "removal" field).
const (
	RemovalRemoved = "removed" // the drainer removed the proxy, then published
	RemovalAbsent  = "absent"  // someone else removed it first
)

// Window is one drained proxy window whose proxy's removal has succeeded or found it absent
// (it is published only then, §3.4): everything an egress event is built from.
type Window struct {
	ProxyID      string // the inspected 64-hex container ID that was read and removed
	ProxyName    string
	Kind         string // the proxy's maf-sandbox.kind label value
	Key          sandbox.Key
	Attribution  Attribution // label, legacy-selectors or caller-key
	PrivateCIDRs string      // the proxy's maf-sandbox.private-cidrs.v1 label, "" when absent
	Start        time.Time   // the proxy's State.StartedAt; zero when unknown
	End          time.Time   // when the stop completed, or the log was read
	Closed       bool        // false exactly when the stop failed (§3.2 step 3)
	Decisions    []sandbox.EgressDecision
	Truncated    bool
	Unreadable   string
	Trigger      Trigger
	Removal      string // RemovalRemoved or RemovalAbsent
	DrainSeconds float64
}
