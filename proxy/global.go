package proxy

import "net/netip"

// nonGlobal lists the blocks isGlobal refuses beyond what netip classifies (unspecified,
// loopback, private, link-local, multicast): egress-and-reap.md §2.3, plus a few stricter
// entries marked below.
var nonGlobal = prefixes(
	"0.0.0.0/8",       // "this network"
	"100.64.0.0/10",   // shared address space (carrier-grade NAT)
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"240.0.0.0/4",     // reserved, 255.255.255.255 included
	"::/96",           // stricter: deprecated IPv4-compatible addresses (:: itself included)
	"2001:db8::/32",   // documentation
	"64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
	"100::/64",        // discard-only
	"2002::/16",       // stricter: 6to4 (as CPython 3.13 does)
	"3fff::/20",       // stricter: documentation (RFC 9637)
	"fec0::/10",       // stricter: deprecated site-local
)

// ietfProtocol is 2001::/23, non-global except the sub-blocks the IANA special-purpose
// registry marks globally reachable (ietfGlobal).
var (
	ietfProtocol = netip.MustParsePrefix("2001::/23")
	ietfGlobal   = prefixes(
		"2001:1::1/128",   // PCP anycast
		"2001:1::2/128",   // TURN anycast
		"2001:1::3/128",   // DNS-SD service registration anycast
		"2001:3::/32",     // AMT
		"2001:4:112::/48", // AS112-v6
		"2001:20::/28",    // ORCHIDv2
		"2001:30::/28",    // drone remote ID
	)
)

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4 address they embed, so
// they are judged by it.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// metadata is the explicit deny list of cloud metadata and host-service endpoints. Several lie
// in blocks refused anyway; listing them keeps them refused under any private allowance.
var metadata = prefixes(
	"168.63.129.16/32",   // Azure wire server
	"100.100.100.200/32", // Alibaba Cloud metadata
	"fd00:ec2::254/128",  // AWS IMDS over IPv6
	"fd20:ce::254/128",   // GCP metadata over IPv6
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// norm strips the zone and unwraps an IPv4-mapped address, so that ::ffff:10.0.0.1 is judged as
// 10.0.0.1.
func norm(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

// isGlobal reports whether a is globally routable in the sense of egress-and-reap.md §2.3. It
// is false for unspecified, loopback, private (RFC 1918, fc00::/7), link-local, multicast and
// the blocks of nonGlobal; for 2001::/23 outside its global sub-blocks; for the metadata
// list; and for IPv4-mapped and NAT64 addresses whose embedded IPv4 address is not global.
// netip.Addr.IsGlobalUnicast is not this check: it accepts RFC 1918.
func isGlobal(a netip.Addr) bool {
	a = norm(a)
	switch {
	case !a.IsValid(), a.IsUnspecified(), a.IsLoopback(), a.IsPrivate(),
		a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsMulticast(),
		inAny(a, nonGlobal), inAny(a, metadata):
		return false
	case ietfProtocol.Contains(a):
		return inAny(a, ietfGlobal)
	case nat64.Contains(a):
		b := a.As16()
		return isGlobal(netip.AddrFrom4([4]byte(b[12:])))
	}
	return true
}

// neverAdmitted reports whether a may never be dialled, whatever the operator's private
// allowance says: loopback, link-local, the metadata list, and addresses that are no
// destination at all (unspecified, multicast, 0.0.0.0/8, broadcast). A NAT64 address is
// judged by the IPv4 address it embeds.
func neverAdmitted(a netip.Addr) bool {
	a = norm(a)
	if nat64.Contains(a) {
		b := a.As16()
		if neverAdmitted(netip.AddrFrom4([4]byte(b[12:]))) {
			return true
		}
	}
	return !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		a.IsMulticast() || a.IsLinkLocalMulticast() || inAny(a, metadata) ||
		(a.Is4() && (a.As4()[0] == 0 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})))
}

// destPolicy decides which resolved addresses the proxy may dial.
type destPolicy struct {
	private       []netip.Prefix // the operator's allowance (§2.3a)
	admitLoopback bool           // tests only: lets in-process tests reach a 127.0.0.1 target
}

// permits reports whether a may be dialled: it is global, or inside the private allowance and
// not [neverAdmitted].
func (p destPolicy) permits(a netip.Addr) bool {
	if isGlobal(a) {
		return true
	}
	if p.admitLoopback && norm(a).IsLoopback() {
		return true
	}
	return !neverAdmitted(a) && inAny(norm(a), p.private)
}
