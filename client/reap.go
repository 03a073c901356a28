package client

import "github.com/mafsandbox/engine/sandbox"

// ReapResult counts what a sweep removed, as a reap reply (messages.APIReapResponse) carries
// it. (The engine's own shape is reaper.Result, which the client does not link: it would
// bring the Docker driver with it.)
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
