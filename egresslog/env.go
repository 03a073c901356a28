package egresslog

import (
	"net/netip"
	"strings"
	"time"
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
