package sandbox

import (
	"fmt"
	"strings"
)

// Isolation is a rung of the isolation ladder: the boundary a backend puts between a workload
// and the host. The ladder is a total order given by [Isolation.Rank]; nothing else orders it.
type Isolation string

// The isolation ladder, weakest first.
const (
	IsolationNone              Isolation = "none"               // host process, host authority
	IsolationRuntime           Isolation = "runtime"            // software boundary in the host process
	IsolationProcess           Isolation = "os_process"         // separate OS process, shared kernel and filesystem
	IsolationContainer         Isolation = "container"          // namespaces and cgroups, shared kernel
	IsolationHardenedContainer Isolation = "hardened_container" // userspace-kernel syscall interception
	IsolationMicroVM           Isolation = "microvm"            // hypervisor boundary
	IsolationVM                Isolation = "vm"                 // dedicated full VM
)

// Ladder lists every rung, weakest first. Its order is the rank table.
func Ladder() []Isolation {
	return []Isolation{IsolationNone, IsolationRuntime, IsolationProcess, IsolationContainer,
		IsolationHardenedContainer, IsolationMicroVM, IsolationVM}
}

// Rank is the rung's position on the ladder, or -1 for a value that is not a rung.
func (i Isolation) Rank() int {
	for r, v := range Ladder() {
		if v == i {
			return r
		}
	}
	return -1
}

// ParseIsolation parses a rung strictly. "process" is refused: it once meant no boundary at
// all, and the process rung is spelled "os_process".
func ParseIsolation(s string) (Isolation, error) { return parseEnum("isolation", s, Ladder()) }

// MeetsFloor reports whether declared is at or above floor. A value off the ladder meets
// nothing and is met by nothing.
func MeetsFloor(declared, floor Isolation) bool {
	d, f := declared.Rank(), floor.Rank()
	return d >= 0 && f >= 0 && d >= f
}

func ladderText() string {
	names := make([]string, 0, len(Ladder()))
	for _, v := range Ladder() {
		names = append(names, string(v))
	}
	return strings.Join(names, " < ")
}

// IsolationScope is how long one sandbox lives: a conversation, or one tool call.
type IsolationScope string

// Isolation scopes, weakest first.
const (
	ScopeConversation IsolationScope = "conversation"
	ScopeCall         IsolationScope = "call"
)

// IsolationScopes lists every scope, weakest first.
func IsolationScopes() []IsolationScope { return []IsolationScope{ScopeConversation, ScopeCall} }

// Rank is the scope's strength, or -1 for an unknown value.
func (s IsolationScope) Rank() int { return rankOf(s, IsolationScopes()) }

// ParseIsolationScope parses a scope strictly.
func ParseIsolationScope(s string) (IsolationScope, error) {
	return parseEnum("isolation scope", s, IsolationScopes())
}

func rankOf[T comparable](v T, all []T) int {
	for i, x := range all {
		if x == v {
			return i
		}
	}
	return -1
}

// parseEnum is the one strict parser every enumeration uses: an unknown string is an error,
// never a guess.
func parseEnum[T ~string](what, s string, all []T) (T, error) {
	for _, v := range all {
		if string(v) == s {
			return v, nil
		}
	}
	valid := make([]string, len(all))
	for i, v := range all {
		valid[i] = string(v)
	}
	return "", &InvalidArgumentError{Reason: fmt.Sprintf("unknown %s %q (valid: %s)", what, s, strings.Join(valid, ", "))}
}
