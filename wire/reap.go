package wire

import "github.com/mafsandbox/engine/sandbox"

// ReapResult counts what a sweep removed: what a reap reply (messages.APIReapResponse)
// carries, as the engine's reaper returns it and the Go client hands it back.
type ReapResult struct {
	Disposed        int // workload containers removed
	ProxiesRemoved  int // proxy containers removed
	NetworksRemoved int
	Failures        []ReapFailure
}

// ReapFailure is one resource a sweep could not remove.
type ReapFailure struct {
	Code         sandbox.DisposalCode // unlisted, unreachable, timeout or refused
	Detail       string
	ResourceID   string
	ResourceKind string // "workload", "proxy", "network" or "" (inventory-wide)
}
