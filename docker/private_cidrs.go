package docker

import (
	"fmt"
	"net/netip"
	"strings"
)

// Widest private-destination blocks: a block wider than the widest private range of its
// family (10.0.0.0/8; fc00::/7, the unique local range) would admit every non-global
// address, the host's bridge gateways among them, which is what the proxy's non-global deny
// exists to refuse.
const (
	minPrivateBits4 = 8
	minPrivateBits6 = 7
)

// PrivateCIDRError refuses a block of the private-destination allowance
// ([Config.EgressPrivateCIDRs], egress-and-reap.md §2.3a): one that does not parse, or one
// wider than any private range. It is [ErrInvalid].
type PrivateCIDRError struct {
	Block  string
	Reason string
}

func (e *PrivateCIDRError) Error() string {
	return fmt.Sprintf("docker: private-destination block %q: %s", e.Block, e.Reason)
}

// Is reports [ErrInvalid].
func (e *PrivateCIDRError) Is(target error) bool { return target == ErrInvalid }

// ParsePrivateCIDRs reads a private-destination allowance written as comma-separated CIDR
// blocks ("10.20.0.0/16, fd00:1::/64"); white space around an entry and empty entries are
// dropped, so "" is no allowance. A block that does not parse or is wider than any private
// range (for instance 0.0.0.0/0 or ::/0) is a [*PrivateCIDRError].
func ParsePrivateCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, &PrivateCIDRError{Block: entry, Reason: "not a CIDR block (address/bits)"}
		}
		if err := checkPrivateCIDR(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// checkPrivateCIDR refuses an invalid block or one wider than the widest private range of
// its family; an IPv4-mapped block counts as the IPv4 block it maps, as the proxy takes it.
func checkPrivateCIDR(p netip.Prefix) error {
	if !p.IsValid() {
		return &PrivateCIDRError{Block: p.String(), Reason: "not a valid CIDR block"}
	}
	addr, bits := p.Addr(), p.Bits()
	if addr.Is4In6() && bits >= 96 {
		addr, bits = addr.Unmap(), bits-96
	}
	switch {
	case addr.Is4() && bits < minPrivateBits4:
		return &PrivateCIDRError{Block: p.String(), Reason: fmt.Sprintf(
			"wider than /%d, wider than any private range: it would admit every non-global IPv4 address, the host's bridge gateways among them", minPrivateBits4)}
	case addr.Is6() && bits < minPrivateBits6:
		return &PrivateCIDRError{Block: p.String(), Reason: fmt.Sprintf(
			"wider than /%d, wider than any private range: it would admit every non-global IPv6 address", minPrivateBits6)}
	}
	return nil
}
