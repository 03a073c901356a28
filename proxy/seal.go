package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/mafsandbox/engine/egresslog"
)

// The seal probe (docs/architecture.md, "The seal proof"). Before the engine connects the
// proxy's outbound leg, the proxy sits on the sandbox's internal network alone, with the
// workload's constraints (no NET_RAW, IPv6 disabled in its namespace). From there it tries
// what a workload would try: TCP and UDP to the segment's gateway address, to every other
// address of the segment, and to the host addresses the engine names, and an IPv6 socket.
// Anything that answers — a connection, a reset, an ICMP port-unreachable, a datagram, a
// usable IPv6 route — is a breach: the host holds an address the workload can reach.
//
// Silence within the budget is taken as "unreachable". On one host a reachable address
// answers a SYN with a reset in about a millisecond; measured on this project's loaded 2-core
// machine (docs/benchmarks.md, "The seal probe's budget"), 1,440 resets in the probe's shape
// (seven addresses times nine ports at once) came back within 25 ms at load 14–19, so a
// 100 ms budget is four times the slowest answer seen, and a breach needs only one of an
// address's nine attempts to answer.

const (
	// maxSegmentHosts bounds the segment sweep: wider segments are swept at their gateway only.
	maxSegmentHosts = 254
)

// SealPorts are the TCP and UDP ports each address is tried on: a closed port answers with a
// reset or port-unreachable just as an open one answers, so any one of them proves reach; the
// list adds the well-known services a firewall that drops closed ports would still let in.
var SealPorts = []int{9, 22, 53, 80, 443, 2375, 2376, 4222, 8080}

// SealConfig is one probe.
type SealConfig struct {
	Targets []netip.Addr // extra addresses to try (the engine names the host's bridge addresses)
	// Skip are addresses never tried: the workload's own on the segment. What answers there
	// is the workload's kernel, and a host holding the same address would be the workload's
	// own to it, not a way out.
	Skip   []netip.Addr
	Budget time.Duration // per attempt; 0 means egresslog.DefaultSealBudget
	// Interfaces lists the probe's own addresses (default: the process's interfaces), from
	// which the segment, its gateway and its other hosts are derived.
	Interfaces func() ([]netip.Prefix, error)
}

// SealReport is a probe's outcome.
type SealReport struct {
	Attempts int
	Breaches []string // what answered, sorted; empty when sealed
}

// Sealed reports whether nothing answered.
func (r SealReport) Sealed() bool { return len(r.Breaches) == 0 }

// SealTargetsFromEnv parses the value of [egresslog.EnvSealTargets].
func SealTargetsFromEnv(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, e := range splitList(s) {
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, egresslog.EnvSealTargets, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ProbeSeal runs the probe. It fails only when its own addresses cannot be read; everything
// the network does is in the report.
func ProbeSeal(ctx context.Context, cfg SealConfig) (SealReport, error) {
	budget := cfg.Budget
	if budget <= 0 {
		budget = egresslog.DefaultSealBudget
	}
	ifaces := cfg.Interfaces
	if ifaces == nil {
		ifaces = interfacePrefixes
	}
	own, err := ifaces()
	if err != nil {
		return SealReport{}, fmt.Errorf("seal probe: read own addresses: %w", err)
	}
	var (
		mu  sync.Mutex
		rep SealReport
		wg  sync.WaitGroup
	)
	breach := func(s string) {
		mu.Lock()
		rep.Breaches = append(rep.Breaches, s)
		mu.Unlock()
	}
	attempt := func(f func()) {
		mu.Lock()
		rep.Attempts++
		mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	for _, p := range own {
		if p.Addr().Is6() && !p.Addr().IsLoopback() {
			breach(fmt.Sprintf("the probe holds an IPv6 address %s: IPv6 is not disabled in the namespace", p))
		}
	}
	for _, a := range sealTargets(own, cfg.Targets, cfg.Skip) {
		for _, port := range SealPorts {
			ap := netip.AddrPortFrom(a, uint16(port))
			attempt(func() {
				if s := tryTCP(ctx, ap, budget); s != "" {
					breach(s)
				}
			})
			attempt(func() {
				if s := tryUDP(ctx, ap, budget); s != "" {
					breach(s)
				}
			})
		}
	}
	for _, dst := range ipv6Targets() {
		attempt(func() {
			if s := tryIPv6(ctx, dst, budget); s != "" {
				breach(s)
			}
		})
	}
	wg.Wait()
	slices.Sort(rep.Breaches)
	return rep, nil
}

// sealTargets lists the addresses to try: for each IPv4 segment the probe is on, its first
// address (where the gateway would be) and, for segments of at most maxSegmentHosts hosts,
// every other host address but the probe's own and the skipped ones; then the extra targets. Loopback is never a
// target: it is the probe's own namespace.
func sealTargets(own []netip.Prefix, extra, skip []netip.Addr) []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	add := func(a netip.Addr) {
		if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() || seen[a] {
			return
		}
		seen[a] = true
		out = append(out, a)
	}
	mine := map[netip.Addr]bool{}
	for _, p := range own {
		mine[p.Addr()] = true
	}
	for _, a := range skip {
		mine[a] = true
	}
	for _, p := range own {
		if !p.Addr().Is4() || p.Addr().IsLoopback() || p.Bits() < 1 {
			continue
		}
		seg := p.Masked()
		first := seg.Addr().Next()
		add(first)
		if hostBits := 32 - p.Bits(); hostBits > 8 || (1<<hostBits)-2 > maxSegmentHosts {
			continue
		}
		for a := first; seg.Contains(a.Next()); a = a.Next() {
			if !mine[a] {
				add(a)
			}
		}
	}
	for _, a := range extra {
		if !mine[a] {
			add(a)
		}
	}
	return out
}

// tryTCP says what answered a connection attempt, "" for silence or no route.
func tryTCP(ctx context.Context, ap netip.AddrPort, budget time.Duration) string {
	d := net.Dialer{Timeout: budget}
	c, err := d.DialContext(ctx, "tcp", ap.String())
	if err == nil {
		c.Close()
		return "tcp " + ap.String() + " accepted a connection"
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "tcp " + ap.String() + " answered with a reset"
	}
	return ""
}

// tryUDP sends one datagram on a connected socket and waits for any answer: a datagram, or an
// ICMP port-unreachable (ECONNREFUSED on the next read), proves reach.
func tryUDP(ctx context.Context, ap netip.AddrPort, budget time.Duration) string {
	d := net.Dialer{Timeout: budget}
	c, err := d.DialContext(ctx, "udp", ap.String())
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(budget))
	if _, err := c.Write([]byte{0}); err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "udp " + ap.String() + " answered port-unreachable"
		}
		return ""
	}
	buf := make([]byte, 1)
	_, err = c.Read(buf)
	switch {
	case err == nil:
		return "udp " + ap.String() + " answered a datagram"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "udp " + ap.String() + " answered port-unreachable"
	}
	return ""
}

// tryIPv6 reports an IPv6 destination a datagram could be sent to: with IPv6 disabled in the
// namespace there is no route and no source address, so the send fails.
func tryIPv6(ctx context.Context, dst string, budget time.Duration) string {
	d := net.Dialer{Timeout: budget}
	c, err := d.DialContext(ctx, "udp6", dst)
	if err != nil {
		return ""
	}
	defer c.Close()
	if _, err := c.Write([]byte{0}); err != nil {
		return ""
	}
	return "udp6 " + dst + " accepted a datagram: IPv6 has a route"
}

// ipv6Targets are the all-nodes multicast group and a router-looking link-local address on
// every non-loopback interface: where a workload with IPv6 would find the host's bridge.
func ipv6Targets() []string {
	ifs, _ := net.Interfaces()
	var out []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			continue
		}
		out = append(out, "[ff02::1%"+i.Name+"]:9", "[fe80::1%"+i.Name+"]:9")
	}
	return out
}

// interfacePrefixes lists the process's interface addresses.
func interfacePrefixes() ([]netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}
