// Package proxy is the filtering CONNECT proxy that runs in a sandbox's egress container
// (egress-and-reap.md §2). It sits dual-homed between the sandbox's internal network and the
// outbound one, and opens a tunnel only to an allowlisted host on port 443.
//
// # Wire behaviour
//
// Each accepted connection is read until the blank line that ends the request head (10 s,
// 64 KiB). The request line must be "CONNECT host:port HTTP/…"; anything else is answered
// 400 or, for another method, 405. The host must match the allowlist ([Match]: fnmatch
// patterns, case-insensitive) and the port must be 443, or the answer is 403. The proxy then
// resolves the name itself — the sandbox never does — and dials only resolved addresses that
// are globally routable or inside the operator's private-destination allowance
// ([WithPrivateCIDRs]), never loopback, link-local or a cloud metadata address. The check runs
// inside the dialer's Control hook, before connect(2), so no SYN ever reaches a refused
// address. No permitted address: 403. Resolution or connection failure within 20 s: 502.
// Otherwise "200 Connection Established", the bytes the client pipelined behind its head, and
// a byte tunnel in both directions. Nothing is decrypted. Every refusal is
// "HTTP/1.1 <code> <reason>\r\ncontent-length: 0\r\n\r\n", and no read or dial is without a
// deadline, so a client is answered or closed, never left hanging.
//
// # Inspected hosts
//
// With [WithInspect], a host under an inspecting rule (methods and path patterns,
// [sandbox.EgressRule]) is not tunnelled. [New] makes the proxy's own CA (ECDSA P-256, a week
// at most; its key only in this process's memory, [Proxy.CACertificatePEM] is what a client
// must trust). After "200 Connection Established" the proxy terminates the client's TLS with
// a leaf for exactly the CONNECT host, refusing a ClientHello that names another (domain
// fronting), and offers only HTTP/1.1 by ALPN (a client that offers h2 falls back). It then
// reads one request at a time, its head bounded by 64 KiB, and decides each: a target that is
// not an origin-form path (or has a fragment, is over 4 KiB, or an escape that does not
// decode), a Host header for another host, an Upgrade (WebSocket), a path that is not normal
// (path.go: `.` or `..` however spelled, `//` but a trailing slash, an encoded slash beside
// an empty or dot piece, a backslash, NUL, double encoding, bytes that are not UTF-8), or a
// method or path the rule does not permit is answered 403 and ends the connection, and
// nothing of it goes upstream; under a shadow rule the last two pass as WOULD-DENY. A
// permitted request is re-serialised (one framing, whatever the client sent) to the host
// over TLS verified against the system roots or [WithUpstreamRoots], never skipped (an
// unverifiable host is 502, UNREACHABLE), written while its responses are read: every
// informational one is relayed, then the final one. Under a rule with credentials
// ([WithCredentials]: one exact host, a method list, never TRACE or TRACK), every form of
// their secrets is masked in all that is relayed back (redact.go). Each request is one
// decision line with its method, path and final status; a refused handshake is one "DENY
// host:port" line. Before its readiness line such a proxy writes its CA certificate
// ([egresslog.FormatCA]). Not yet: the memory budget below does not count inspected
// connections (measured instead: 100 held open after a request each, clients and origin in
// the same process, stay under 9 MiB live with the race detector on,
// TestInspectMemoryOf100Connections).
//
// # Memory
//
// The proxy serves one untrusted sandbox inside a container limited to 64 MiB, and being
// OOM-killed would cut every tunnel and lose its decision log. So its own limits, not what the
// sandbox sends, bound what it holds: at most [MaxConns] connections (more are answered 503);
// of a request head, one 1 KiB read chunk and the request line reduced to what the parse
// reads; and a copy buffer per tunnel direction only while that direction has bytes to move,
// 64 KiB ones for the first 128 at once and 4 KiB ones past that. proxy_opts.go adds it up
// against [MemoryLimit], the soft limit cmd/proxy gives the Go runtime.
//
// # Decision log
//
// Every policy decision is one line on the decision log (standard output in the container),
// written through [egresslog.Writer]: ALLOW, DENY, DENY-NONGLOBAL or UNREACHABLE with the host
// exactly as received, and for an inspected host's request its method and path too.
// Malformed and non-CONNECT requests are not logged.
//
// # The process
//
// [Run] is the whole process contract (§2.6): configuration from the environment
// ([ConfigFromEnv]: MAF_SANDBOX_ALLOW, MAF_SANDBOX_PRIVATE_CIDRS, MAF_SANDBOX_PROXY_PORT,
// MAF_SANDBOX_INSPECT, MAF_SANDBOX_UPSTREAM_CAS), listen
// on 0.0.0.0:3128, the readiness line once listening, and on cancellation (SIGTERM) a stop
// that closes every tunnel at once. The package uses the standard library and egresslog only,
// so the binary is small and static.
package proxy
