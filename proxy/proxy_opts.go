package proxy

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// Wire limits of egress-and-reap.md §2.1 and §2.4. None of them is configurable outside this
// package's own tests.
const (
	headTimeout   = 10 * time.Second // whole request head, from accept
	maxHead       = 64 << 10         // bytes before the blank line
	dialTimeout   = 20 * time.Second // resolution and connection together
	idleTimeout   = 10 * time.Minute // a tunnel with no progress either way
	writeTimeout  = 10 * time.Second // one response to the client
	lingerTime    = time.Second      // draining a refused client before closing
	maxConns      = 1024             // concurrent connections; more are answered 503
	overflowSlots = 64               // over-cap refusals that linger at once
	allowedPort   = 443              // the only port a tunnel may reach
)

// MaxConns is the number of connections the proxy handles at once; more are answered
// "503 Service Unavailable" (egress-and-reap.md §2.4).
const MaxConns = maxConns

// The memory budget. The proxy runs under its container's memory limit (docker/network.go
// proxyMemory: 64 MiB, egress-and-reap.md §1.5). A sandbox that floods it with connections
// must not get it OOM-killed, which would cut every tunnel and lose the decision log, so what
// the process holds is bounded by these limits, whatever the sandbox sends:
//
//	per connection in any state, copy buffers aside: an unfinished      connBudget 16 KiB
//	head (one 1 KiB read chunk and a request line reduced to under
//	300 bytes, readHead), a resolution, a tunnel (two goroutines, two
//	sockets; TestConnectionMemory measures 4-8 KiB in each state)
//	  × (maxConns 1024 + overflowSlots 64)                               17 MiB
//	large copy buffers lent at once: largeBufs 128 × copyBufSize 64 KiB   8 MiB
//	small ones past those: one per tunnel direction or lingering          8.25 MiB
//	refusal, (2 × 1024 + 64) × smallBufSize 4 KiB
//	runtime, binary's data, decision log: runtimeBudget                   4 MiB
//	                                                                      -------
//	live at most (worstLive)                                              37.25 MiB
//
// A tunnel direction borrows a buffer only while it has bytes to move (bufPool), so idle
// tunnels hold none. [MemoryLimit], the Go runtime's soft limit that cmd/proxy sets, is
// 48 MiB: above worstLive, so that the garbage collector, which would let the heap grow to
// twice the live data, collects harder as the process nears it and never lets it reach the
// cgroup limit; and 16 MiB under that limit, which also charges the container for its
// sockets' kernel state (a few KiB each, two per tunnel) and the binary's pages.
//
// Before this budget a tunnel held two 64 KiB buffers for its whole life (137 KiB a tunnel,
// measured) and an unfinished head its whole length and more (84 KiB for 60 KiB): 1024 of
// either was 84-137 MiB, and either flood got the proxy OOM-killed
// (integration/egress/proxy_flood_test.go).
const (
	copyBufSize   = 64 << 10 // a large copy buffer, as the reference's (§2.4)
	largeBufs     = 128      // large buffers lent at once
	smallBufSize  = 4 << 10  // a copy buffer once largeBufs are lent
	connBudget    = 16 << 10 // per connection, copy buffers aside
	runtimeBudget = 4 << 20
	worstLive     = (maxConns+overflowSlots)*connBudget + largeBufs*copyBufSize +
		(2*maxConns+overflowSlots)*smallBufSize + runtimeBudget

	// MemoryLimit is the Go runtime's soft memory limit in the proxy process (cmd/proxy sets
	// it unless GOMEMLIMIT is in the environment), sized to the budget above.
	MemoryLimit = 48 << 20
)

// The budget must fit under the soft limit: a negative difference does not convert to uint,
// so raising a limit past it fails to compile.
const _ = uint(MemoryLimit - worstLive)

// Resolver resolves a name to addresses; *net.Resolver implements it. The proxy asks for
// network "ip" and judges every answer itself.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Option configures a [Proxy]. Options are applied in order over the defaults; nil options
// are skipped and the first error stops [New].
type Option func(*options) error

type options struct {
	log           io.Writer
	private       []netip.Prefix
	resolver      Resolver
	inspect       []sandbox.EgressRule
	credentials   []egresslog.Credential
	upstreamRoots *x509.CertPool

	// Test hooks: unexported, so only this package's tests can set them.
	admitLoopback bool
	listenHost    string // Run's listen address, 0.0.0.0 outside tests
	dialPort      int    // dial this port instead of the requested one (a loopback test target)
	headTimeout   time.Duration
	dialTimeout   time.Duration
	idleTimeout   time.Duration
	lingerTime    time.Duration
	maxConns      int
	largeBufs     int
	dialGuard     func(netip.Addr) error // a second check after the policy, so that a broken policy cannot make a test dial off loopback
}

func defaultOptions() options {
	return options{
		log:         os.Stdout,
		listenHost:  "0.0.0.0",
		headTimeout: headTimeout,
		dialTimeout: dialTimeout,
		idleTimeout: idleTimeout,
		lingerTime:  lingerTime,
		maxConns:    maxConns,
		largeBufs:   largeBufs,
	}
}

// WithDecisionLog writes the decision log (and nothing else) to w instead of standard
// output. Give it an unbuffered writer: each line is one Write.
func WithDecisionLog(w io.Writer) Option {
	return func(o *options) error {
		if w == nil {
			return fmt.Errorf("%w: nil decision log", ErrInvalidConfig)
		}
		o.log = w
		return nil
	}
}

// WithPrivateCIDRs sets the operator's private-destination allowance (egress-and-reap.md
// §2.3a): resolved addresses inside these blocks are dialled although they are not global.
// It never admits loopback, link-local, a metadata address, or an address that is no
// destination (unspecified, multicast, broadcast), whatever the blocks cover; and a name must
// still be on the allowlist. Blocks are masked to their prefix length; an IPv4-mapped block is
// taken as the IPv4 block it maps. The default is none.
func WithPrivateCIDRs(blocks ...netip.Prefix) Option {
	return func(o *options) error {
		o.private = o.private[:0]
		for _, b := range blocks {
			if !b.IsValid() {
				return fmt.Errorf("%w: invalid private block %v", ErrInvalidConfig, b)
			}
			if b.Addr().Is4In6() && b.Bits() >= 96 {
				b = netip.PrefixFrom(b.Addr().Unmap(), b.Bits()-96)
			}
			o.private = append(o.private, b.Masked())
		}
		return nil
	}
}

// WithResolver resolves names with r instead of net.DefaultResolver (which, in the static
// binary, is Go's own resolver reading the /etc/resolv.conf and /etc/hosts the engine
// injects).
func WithResolver(r Resolver) Option {
	return func(o *options) error {
		if r == nil {
			return fmt.Errorf("%w: nil resolver", ErrInvalidConfig)
		}
		o.resolver = r
		return nil
	}
}

// WithInspect decides the requests to the hosts of rules one by one instead of tunnelling
// them: each rule must ask for inspection (methods or paths) and pass
// [sandbox.CheckEgressRules]; its host must also be on the allowlist given to [New]. With any
// rule, [New] makes the proxy's own CA, whose key never leaves the process, and
// [Proxy.CACertificatePEM] is the certificate a workload must trust. The default is none.
func WithInspect(rules ...sandbox.EgressRule) Option {
	return func(o *options) error {
		if err := sandbox.CheckEgressRules(rules); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		for _, r := range rules {
			if !r.Narrows() {
				return fmt.Errorf("%w: rule for %q inspects nothing (no methods, no paths)", ErrInvalidConfig, r.Host)
			}
		}
		o.inspect = slices.Clone(rules)
		return nil
	}
}

// WithCredentials swaps each credential's placeholder for its secret in its header, on the
// requests to its host that its inspecting rule passes and its methods and paths match,
// never on a TRACE or TRACK; and it masks every form of the secrets in what comes back from
// that host. Its host must be an inspecting rule's host ([WithInspect]), one exact name, and
// its method list must not be empty; [New] refuses one that is not. The proxy never writes
// a secret anywhere.
func WithCredentials(creds ...egresslog.Credential) Option {
	return func(o *options) error {
		o.credentials = slices.Clone(creds)
		return nil
	}
}

// WithUpstreamRoots verifies inspected hosts' certificates against roots instead of the
// system roots. Verification is never skipped.
func WithUpstreamRoots(roots *x509.CertPool) Option {
	return func(o *options) error {
		if roots == nil {
			return fmt.Errorf("%w: nil upstream roots", ErrInvalidConfig)
		}
		o.upstreamRoots = roots
		return nil
	}
}
