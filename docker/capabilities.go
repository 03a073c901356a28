package docker

import (
	"fmt"
	"slices"
	"strings"
)

// addable are the capabilities a configuration may give back to its workloads after --cap-drop
// ALL, in Docker's spelling: a root guest's file ownership and permission checks (CHOWN,
// DAC_OVERRIDE), its changes of user and group (SETUID, SETGID), and signals to processes of
// other users (KILL). None of them reaches outside the container's namespaces; everything else
// (NET_RAW, SYS_ADMIN, MKNOD, ...) stays dropped.
var addable = []string{"CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID", "KILL"}

// AddableCapabilities returns the capabilities [Config.CapAdd] may name.
func AddableCapabilities() []string { return slices.Clone(addable) }

// canonicalCaps returns names upper-cased, without a CAP_ prefix and without repeats, in the
// order first given; nil for none.
func canonicalCaps(names []string) []string {
	var out []string
	for _, n := range names {
		c := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(n)), "CAP_")
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// checkCapAdd refuses a capability outside [AddableCapabilities] (names already canonical).
func checkCapAdd(names []string) error {
	for _, c := range names {
		if !slices.Contains(addable, c) {
			return fmt.Errorf("%w: capability %q may not be added to a workload; only %s may",
				ErrInvalid, c, strings.Join(addable, ", "))
		}
	}
	return nil
}
