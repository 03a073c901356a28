package proxy

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"
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
	copyBufSize   = 64 << 10         // per direction of a tunnel
)

// Resolver resolves a name to addresses; *net.Resolver implements it. The proxy asks for
// network "ip" and judges every answer itself.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Option configures a [Proxy]. Options are applied in order over the defaults; nil options
// are skipped and the first error stops [New].
type Option func(*options) error

type options struct {
	log      io.Writer
	private  []netip.Prefix
	resolver Resolver

	// Test hooks: unexported, so only this package's tests can set them.
	admitLoopback bool
	listenHost    string // Run's listen address, 0.0.0.0 outside tests
	dialPort      int    // dial this port instead of the requested one (a loopback test target)
	headTimeout   time.Duration
	dialTimeout   time.Duration
	idleTimeout   time.Duration
	lingerTime    time.Duration
	maxConns      int
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
