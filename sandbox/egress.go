package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

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

// EgressRule is one allowlist entry: a host, optionally narrowed to HTTP methods. A rule with
// no methods is the bare host.
type EgressRule struct {
	Host      string
	Methods   []string // upper-case HTTP tokens; empty = every method
	Authority string   // opaque to the core; carried for the enforcer
}

// Hosts builds bare-host rules, the common allowlist.
func Hosts(hosts ...string) []EgressRule {
	rules := make([]EgressRule, len(hosts))
	for i, h := range hosts {
		rules[i] = EgressRule{Host: h}
	}
	return rules
}

// Narrows reports whether the rule restricts methods.
func (r EgressRule) Narrows() bool { return len(r.Methods) > 0 }

// normalizeEgressRules collapses equivalent entries (hosts compared case-insensitively, method
// sets as sets), refuses lower-case or empty method tokens, and refuses one host given two
// different method sets. Host strings themselves are not validated by the core.
func normalizeEgressRules(rules []EgressRule) ([]EgressRule, error) {
	seen := make(map[string]int, len(rules))
	out := make([]EgressRule, 0, len(rules))
	for _, r := range rules {
		methods, err := normalizeMethods(r)
		if err != nil {
			return nil, err
		}
		r.Methods = methods
		fold := strings.ToLower(r.Host)
		if i, ok := seen[fold]; ok {
			if !slices.Equal(out[i].Methods, r.Methods) {
				return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
					"egress allowlist names host %q twice with different methods (%s and %s)",
					r.Host, methodText(out[i].Methods), methodText(r.Methods))}
			}
			continue
		}
		seen[fold] = len(out)
		out = append(out, r)
	}
	return out, nil
}

func normalizeMethods(r EgressRule) ([]string, error) {
	if len(r.Methods) == 0 {
		return nil, nil
	}
	ms := make([]string, 0, len(r.Methods))
	for _, m := range r.Methods {
		if m == "" || m != strings.ToUpper(m) || strings.ContainsAny(m, " \t/") {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
				"egress rule for %q has method %q: methods are upper-case HTTP tokens", r.Host, m)}
		}
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return slices.Compact(ms), nil
}

func methodText(ms []string) string {
	if len(ms) == 0 {
		return "every method"
	}
	return strings.Join(ms, ",")
}

// EgressHosts returns the hosts of rules, in order.
func EgressHosts(rules []EgressRule) []string {
	hosts := make([]string, len(rules))
	for i, r := range rules {
		hosts[i] = r.Host
	}
	return hosts
}
