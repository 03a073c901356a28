package sandbox

import "slices"

// Egress is the one network mode a workload runs in. Nothing compares modes: a backend serves
// a spec only when the spec's mode is in its declared set, never a "stricter" one instead.
type Egress string

// Egress modes.
const (
	EgressUnrestricted Egress = "unrestricted"
	EgressAllowlist    Egress = "allowlist"
	EgressClosed       Egress = "closed"
)

// EgressModes lists every mode.
func EgressModes() []Egress { return []Egress{EgressUnrestricted, EgressAllowlist, EgressClosed} }

// ParseEgress parses a mode strictly.
func ParseEgress(s string) (Egress, error) { return parseEnum("egress", s, EgressModes()) }

// EgressSet is a set of egress modes.
type EgressSet map[Egress]struct{}

// NewEgressSet returns a set holding modes.
func NewEgressSet(modes ...Egress) EgressSet {
	s := make(EgressSet, len(modes))
	for _, m := range modes {
		s[m] = struct{}{}
	}
	return s
}

// Has reports membership.
func (s EgressSet) Has(m Egress) bool { _, ok := s[m]; return ok }

// Sorted lists the members in lexical order.
func (s EgressSet) Sorted() []Egress {
	out := make([]Egress, 0, len(s))
	for m := range s {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}
