package egresslog

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// The proxy program's environment (egress-and-reap.md §2.6): what the engine sets on a proxy
// container and the proxy reads. It lives here, beside the decision grammar, so that the
// engine (package actors) writes it without linking the proxy program, and the proxy reads the
// same names.
const (
	// EnvAllow is the allowlist, comma-joined in spec order.
	EnvAllow = "MAF_SANDBOX_ALLOW"
	// EnvPrivateCIDRs is the private-destination allowance, comma-joined CIDR blocks; empty or
	// unset means none.
	EnvPrivateCIDRs = "MAF_SANDBOX_PRIVATE_CIDRS"
	// EnvInspect lists the inspecting rules ([FormatInspect]): the hosts whose requests the
	// proxy decides one by one instead of tunnelling. Unset or empty: none.
	EnvInspect = "MAF_SANDBOX_INSPECT"
	// EnvCredentials holds the credentials the proxy swaps in ([FormatCredentials]), secrets
	// included. Unset or empty: none.
	EnvCredentials = "MAF_SANDBOX_CREDENTIALS"
	// EnvUpstreamCAs is a PEM bundle the proxy verifies inspected hosts against instead of
	// the system roots. Unset or empty: the system roots.
	EnvUpstreamCAs = "MAF_SANDBOX_UPSTREAM_CAS"
	// EnvPort is the port to listen on, default [DefaultPort].
	EnvPort = "MAF_SANDBOX_PROXY_PORT"
	// DefaultPort is the port the proxy listens on when [EnvPort] is unset or empty.
	DefaultPort = 3128

	// EnvSealTargets, when set (even empty), makes the proxy prove the seal before it listens:
	// comma-joined extra addresses to try besides its own segment's ([FormatSealTargets]).
	EnvSealTargets = "MAF_SANDBOX_SEAL_TARGETS"
	// EnvSealSkip lists comma-joined addresses of the segment the probe does not try: the
	// workload's own, which may already be up there while its gate holds its command.
	EnvSealSkip = "MAF_SANDBOX_SEAL_SKIP"
	// DefaultSealBudget bounds every attempt of the seal probe; they all run at once.
	DefaultSealBudget = 100 * time.Millisecond

	// EnvGateListen is the proxy's own address on the internal network, ADDRESS:PORT, where
	// it hands the release token to the workload's gate once sealed. Unset: no gate to release.
	EnvGateListen = "MAF_SANDBOX_GATE_LISTEN"
	// EnvGateToken is the release token, drawn by the engine per workload create.
	EnvGateToken = "MAF_SANDBOX_GATE_TOKEN"
	// GatePort is the port of the release, beside the proxy's own [DefaultPort].
	GatePort = 3129
)

// FormatSealTargets is the value of [EnvSealTargets] for addrs.
func FormatSealTargets(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// FormatInspect is the value of [EnvInspect] for the inspecting rules among rules (those that
// [sandbox.EgressRule.Narrows]): their [sandbox.EgressRule.Canonical] forms, comma-joined
// ("api.example methods=GET;HEAD paths=/v1/**", a shadow rule followed by " shadow"). A
// canonical form holds no comma.
func FormatInspect(rules []sandbox.EgressRule) string {
	var out []string
	for _, r := range rules {
		if r.Narrows() {
			r.Credentials = nil // they reach the proxy in EnvCredentials, secrets and all
			out = append(out, r.Canonical())
		}
	}
	return strings.Join(out, ",")
}

// ParseInspect reads [EnvInspect]'s value back into rules. It fails with
// [ErrInvalidInspect] for an entry that is not "host methods=… paths=… [shadow]" or that the grammar
// of [sandbox.EgressRule] refuses (the proxy stops rather than inspect less than asked).
func ParseInspect(s string) ([]sandbox.EgressRule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var rules []sandbox.EgressRule
	for _, e := range strings.Split(s, ",") {
		f := strings.Split(e, " ")
		shadow := len(f) == 4 && f[3] == "shadow"
		if shadow {
			f = f[:3]
		}
		methods, okM := strings.CutPrefix(f[min(1, len(f)-1)], "methods=")
		paths, okP := strings.CutPrefix(f[len(f)-1], "paths=")
		if len(f) != 3 || !okM || !okP {
			return nil, fmt.Errorf("%w: %q is not \"host methods=… paths=… [shadow]\"", ErrInvalidInspect, e)
		}
		rules = append(rules, sandbox.EgressRule{Host: f[0], Methods: splitNonEmpty(methods), Paths: splitNonEmpty(paths), Shadow: shadow})
	}
	if err := sandbox.CheckEgressRules(rules); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidInspect, err)
	}
	for _, r := range rules {
		if !r.Narrows() {
			return nil, fmt.Errorf("%w: %q inspects nothing", ErrInvalidInspect, r.Host)
		}
	}
	return rules, nil
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ";")
}
