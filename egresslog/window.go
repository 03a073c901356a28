package egresslog

// A drained window is what the drain reports to the backend's observer as a
// sandbox.EgressWindow: the decisions a proxy logged, whose key they were, and how the proxy
// ended. Package events turns it into an event; building and delivering events is not this
// package's.

// Trigger names the cleanup path that removed a proxy (sandbox.EgressWindow.Trigger).
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
