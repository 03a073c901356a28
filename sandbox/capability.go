package sandbox

import (
	"slices"
	"strings"
)

// Capability is one thing a sandbox can do for a workload.
type Capability string

// The capabilities of the protocol.
const (
	Exec             Capability = "exec"              // Sandbox.Exec, argv and shell strings
	RunCode          Capability = "run_code"          // Sandbox.RunCode
	HostTools        Capability = "host_tools"        // guest-to-host function calls
	FilesIn          Capability = "files_in"          // WriteFile
	FilesOut         Capability = "files_out"         // StatFile and ReadFile on named paths
	FilesList        Capability = "files_list"        // ListDir
	FilesDelete      Capability = "files_delete"      // Remove
	Snapshot         Capability = "snapshot"          // Reset and the reset cleanup rung
	Reclaim          Capability = "reclaim"           // router-managed reclaim cleanup
	AttachedIdentity Capability = "attached_identity" // platform identity scoped to the sandbox
	EgressMethods    Capability = "egress_methods"    // inspecting allowlist entries (methods, paths)
	Processes        Capability = "processes"         // ProcessRunner: processes that live across calls
	// SnapshotFiles: snapshots of the sandbox's filesystem alone (SnapshotHolds), taken
	// (Snapshottable) and restored (SnapshotKeeper.Restore); never memory or processes.
	SnapshotFiles Capability = "snapshot_files"
	// Fork: new sandboxes made from one snapshot (SnapshotKeeper.Fork).
	Fork Capability = "fork"
)

// Capabilities lists every capability.
func Capabilities() []Capability {
	return []Capability{Exec, RunCode, HostTools, FilesIn, FilesOut, FilesList, FilesDelete,
		Snapshot, Reclaim, AttachedIdentity, EgressMethods, Processes, SnapshotFiles, Fork}
}

// ParseCapability parses a capability strictly.
func ParseCapability(s string) (Capability, error) { return parseEnum("capability", s, Capabilities()) }

// CapabilitySet is an immutable-by-convention set of capabilities.
type CapabilitySet map[Capability]struct{}

// NewCapabilitySet returns a set holding caps.
func NewCapabilitySet(caps ...Capability) CapabilitySet {
	s := make(CapabilitySet, len(caps))
	for _, c := range caps {
		s[c] = struct{}{}
	}
	return s
}

// DefaultCapabilities is what a workload requires, and a backend is taken to offer, when
// nothing is said: exec and files_in.
func DefaultCapabilities() CapabilitySet { return NewCapabilitySet(Exec, FilesIn) }

// Has reports membership.
func (s CapabilitySet) Has(c Capability) bool { _, ok := s[c]; return ok }

// Union returns a new set with the members of both.
func (s CapabilitySet) Union(o CapabilitySet) CapabilitySet {
	u := make(CapabilitySet, len(s)+len(o))
	for c := range s {
		u[c] = struct{}{}
	}
	for c := range o {
		u[c] = struct{}{}
	}
	return u
}

// Minus returns the members of s that o lacks.
func (s CapabilitySet) Minus(o CapabilitySet) CapabilitySet {
	d := make(CapabilitySet)
	for c := range s {
		if !o.Has(c) {
			d[c] = struct{}{}
		}
	}
	return d
}

// Intersect returns the members in both sets.
func (s CapabilitySet) Intersect(o CapabilitySet) CapabilitySet {
	d := make(CapabilitySet)
	for c := range s {
		if o.Has(c) {
			d[c] = struct{}{}
		}
	}
	return d
}

// Clone copies the set.
func (s CapabilitySet) Clone() CapabilitySet { return s.Union(nil) }

// Sorted lists the members in lexical order, for messages that must be stable.
func (s CapabilitySet) Sorted() []Capability {
	out := make([]Capability, 0, len(s))
	for c := range s {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// String renders the sorted members, comma separated.
func (s CapabilitySet) String() string { return joinSorted(s.Sorted()) }

func joinSorted[T ~string](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
