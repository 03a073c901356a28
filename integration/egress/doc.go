// Package egress tests allowlisted egress against a real Docker engine: the network topology,
// the proxy and its gate, attacks from the workload, the DNS canary, egress events exactly
// once across faults, the proxy under a connection flood, disposal of a proxy and its
// network, and 250 allowlisted sandboxes at once. It holds only tests; they fail, rather than
// skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package egress
