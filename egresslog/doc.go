// Package egresslog owns the egress proxy's contract with the engine: the environment the
// engine sets on a proxy container, the decision-log grammar the proxy writes and the drain
// reads, the attribution label that says whose window a proxy's log is, and the window a
// drain hands on.
//
// # The environment
//
// The engine configures a proxy container through its environment (egress-and-reap.md §2.6):
// [EnvAllow], [EnvPrivateCIDRs] and [EnvPort] for the policy and the listener, [EnvSealTargets]
// and [EnvSealSkip] for the seal probe ([FormatSealTargets]), [EnvGateListen] and
// [EnvGateToken] for the workload gate's release on [GatePort]. The names live here, not in
// package proxy, so that the engine writes them without linking the proxy program.
//
// # The decision log
//
// The proxy writes one line per decision to its standard output (egress-and-reap.md §2.5):
//
//	VERB SP host ":" port LF                          a tunnel (or a refused connection)
//	VERB SP host ":" port SP method SP path LF        one request an inspecting rule decided
//	VERB ∈ {ALLOW, DENY, DENY-NONGLOBAL, UNREACHABLE}
//
// with no timestamp, byte count or request id, so a Go proxy and the reference Python proxy
// write the same bytes for a tunnel and one parser reads both. The request form is an
// extension: a tunnel line is unchanged, and a parser that predates it skips request lines
// (their port is not all digits) rather than misreading them. The path is the raw request
// path without its query, cut to [MaxLoggedPath] bytes. A proxy that inspects also writes,
// before its readiness line, its CA certificate ([FormatCA], read by [ParseCA]); the parser
// skips that line. The proxy writes through a [Writer], which
// emits each line with a single Write under a mutex; [FormatDecision] refuses a host that
// would break the grammar (a space, a control byte, a line feed). Before any decision the proxy
// writes the readiness line ([FormatReady]), which contains [ReadyMarker] and which the parser
// skips.
//
// [ParseLog] reads a log back (§3.3): it keeps the last [TailLines] lines, reads at most
// [LogMaxBytes] bytes, optionally strips the engine's --timestamps prefix into
// [sandbox.EgressDecision].At, skips every line that is not a decision, and reports in
// [Truncation] whether the window may be short.
//
// # Attribution
//
// A proxy container carries the maf-sandbox.key.v1 label ([label.KeyV1]): the key that ran
// behind it, encoded losslessly by [label.EncodeKey] (§3.5), or empty when the encoding exceeds
// [label.KeyBudget]. [KeyFromLabels] recovers the key from a proxy's labels, or says why it
// cannot ([Attribution]); [CallerKeyStandsIn] is the one rule under which a key-addressed
// caller's own key may stand in for a proxy that carries nothing to read, and [Attribute]
// combines the two.
//
// # Windows
//
// A drain ends in a [Window]: the decisions, the key, the [Trigger] that removed the proxy and
// how the removal went. The engine hands it to its egress sink; package events turns it into
// the egress.observed event and delivers it (docs/events.md). Building and delivering events
// is not this package's.
//
// The package imports neither the docker nor any NATS package: the proxy binary links it
// (with package sandbox's types), and a proxy that links no NATS client is one less thing to
// audit in the one program that faces the sandbox. That is why the events are a separate
// package (events); cmd/proxy's tests fail if the proxy ever links a nats-io module.
package egresslog
