package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/mafsandbox/engine/sandbox"
)

// errRefusedAddress is what the dialer's Control hook returns for an address the policy
// refuses; the socket is closed before connect(2), so no SYN leaves.
var errRefusedAddress = errors.New("destination address refused")

// control is the dialer's Control hook: the last check before connect(2), on the exact
// address about to be dialled.
func (p *Proxy) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", errRefusedAddress, address, err)
	}
	if !p.policy.permits(ap.Addr()) {
		return fmt.Errorf("%w: %s", errRefusedAddress, ap.Addr())
	}
	if p.opts.dialGuard != nil {
		return p.opts.dialGuard(ap.Addr())
	}
	return nil
}

// literalAddr returns the address of an IP-literal host ("192.0.2.1", "::1", "[::1]"), with
// brackets stripped.
func literalAddr(host string) (netip.Addr, bool) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	a, err := netip.ParseAddr(h)
	return a, err == nil
}

// connect resolves host and dials it on port, within the dial timeout. It returns the
// connection and [sandbox.DecisionAllow], or no connection and the decision to log:
// [sandbox.DecisionDenyNonGlobal] when no resolved address is permitted (nothing was dialled),
// [sandbox.DecisionUnreachable] when resolution failed or no permitted address answered.
func (p *Proxy) connect(ctx context.Context, host string, port int) (net.Conn, sandbox.EgressDecisionCode) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.dialTimeout)
	defer cancel()

	var addrs []netip.Addr
	if a, ok := literalAddr(host); ok {
		addrs = []netip.Addr{a}
	} else {
		var err error
		if addrs, err = p.resolver.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
			return nil, sandbox.DecisionUnreachable
		}
	}
	permitted := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if p.policy.permits(a) {
			permitted = append(permitted, norm(a))
		}
	}
	if len(permitted) == 0 {
		return nil, sandbox.DecisionDenyNonGlobal
	}
	if p.opts.dialPort != 0 {
		port = p.opts.dialPort
	}
	d := net.Dialer{ControlContext: p.control}
	for _, a := range permitted {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		if err == nil {
			return c, sandbox.DecisionAllow
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, sandbox.DecisionUnreachable
}
