package sandbox

import "time"

// An age-based sweep (egress-and-reap.md §4) removes what an engine created longer ago than an
// age: workloads, their egress enforcers (proxies), their networks and leftover fingerprint
// observers. [ReapResult] is what one sweep did, in every form it takes: the reaper's return,
// the reap call's answer, the reap.completed event and engine reap's output.

// Kinds of resource a sweep removes, as [ReapFailure.ResourceKind] and [ReapDecision.Kind]
// name them.
const (
	ReapWorkload = "workload"
	ReapProxy    = "proxy"
	ReapNetwork  = "network"
	ReapObserver = "observer" // a fingerprint observer container an engine left behind
)

// ReapResult is what one sweep did. Counts include only successful removals.
type ReapResult struct {
	Disposed        int // workload containers removed
	ProxiesRemoved  int // proxy containers removed (confirmed-absent ones not counted)
	NetworksRemoved int
	// ObserversRemoved counts fingerprint observer containers removed: each lives only while
	// it measures, so one the sweep finds is what an engine that died left.
	ObserversRemoved int
	Failures         []ReapFailure

	Scope      string // the only scope swept; "" for every scope
	OlderThan  time.Duration
	Cutoff     time.Time // now − OlderThan; resources created strictly before it expired
	StartedAt  time.Time // the one reading of the clock
	FinishedAt time.Time
	DryRun     bool
	// Resources is every qualifying resource the inventory saw, in removal order, with what
	// the sweep decided and did.
	Resources []ReapDecision
}

// ReapFailure is one problem of a sweep (§4.7).
type ReapFailure struct {
	Code         DisposalCode // unlisted | unreachable | timeout | refused
	Detail       string       // starts with "<resource name or ID>: "
	ResourceID   string
	ResourceKind string // ReapWorkload | ReapProxy | ReapNetwork | ReapObserver | "" (inventory-wide)
}

// ReapAction says what became of one resource.
type ReapAction string

// What a sweep does with a resource.
const (
	ReapKept        ReapAction = "kept"         // its group's anchor is not expired
	ReapWouldRemove ReapAction = "would-remove" // dry run: expired, revalidated
	ReapRemoved     ReapAction = "removed"
	ReapAbsent      ReapAction = "absent"   // already gone when removed by ID
	ReapFailed      ReapAction = "failed"   // see Failures
	ReapSkipped     ReapAction = "skipped"  // an earlier step of its group stopped the group
	ReapReplaced    ReapAction = "replaced" // its anchor was gone at revalidation: the group is left alone
	ReapNotReached  ReapAction = "not-reached"
)

// ReapDecision is one qualifying resource and what the sweep did with it.
type ReapDecision struct {
	Group   string // the base name maf-sandbox-docker-<12 hex>, or an observer's own name
	Kind    string // ReapWorkload | ReapProxy | ReapNetwork | ReapObserver
	ID      string
	Name    string
	Created time.Time
	Anchor  bool // its Created decided the group
	Expired bool // the group's anchor is expired
	Action  ReapAction
}
