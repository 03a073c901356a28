package docker

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"net/netip"
)

// The egress subnet pool. Every allowlisted sandbox's internal network gets an explicit small
// subnet carved from one configurable range, instead of one from the daemon's default address
// pools (about 30 networks on a stock daemon). There is no registry: the daemon is the
// record. A network's candidates start at a slot derived from its name and go round the pool;
// the create is tried on each in turn and moves on when the daemon reports an overlap, so
// several engine processes sharing one daemon, and an engine restarted next to its old
// networks, never need to agree on anything. Removing a network gives its subnet back.

const (
	// DefaultEgressSubnetPool is the range allowlisted networks are carved from:
	// 10.213.0.0/16 holds 8,192 networks of /29. It lies outside the daemon's default address
	// pools (172.17.0.0/16–172.31.0.0/16 and 192.168.0.0/16), so ordinary networks never take
	// it, and a network of the pool never takes theirs. Pick another with
	// Config.EgressSubnetPool when your hosts route 10.213.0.0/16.
	DefaultEgressSubnetPool = "10.213.0.0/16"
	// EgressSubnetBits is each network's prefix length: a /29 has six host addresses, and a
	// sandbox needs three (the reserved gateway, the proxy, the workload).
	EgressSubnetBits = 29
	// maxSubnetTries bounds one create's walk round the pool before it reports exhaustion.
	maxSubnetTries = 512
)

// SubnetPool hands out the candidate subnets of one range.
type SubnetPool struct {
	base  netip.Prefix
	bits  int
	slots uint64
}

// NewSubnetPool returns the pool of /bits subnets in base. base must be IPv4, and bits no
// shorter than base's and at most 30.
func NewSubnetPool(base netip.Prefix, bits int) (SubnetPool, error) {
	if !base.IsValid() || !base.Addr().Is4() {
		return SubnetPool{}, fmt.Errorf("%w: egress subnet pool %s is not an IPv4 range", ErrInvalid, base)
	}
	if bits < base.Bits() || bits > 30 {
		return SubnetPool{}, fmt.Errorf("%w: egress subnets of /%d do not fit pool %s (need /%d to /30)", ErrInvalid, bits, base, base.Bits())
	}
	return SubnetPool{base: base.Masked(), bits: bits, slots: 1 << (bits - base.Bits())}, nil
}

// Base is the pool's range.
func (p SubnetPool) Base() netip.Prefix { return p.base }

// Size is the number of subnets in the pool.
func (p SubnetPool) size() int { return int(p.slots) }

// Contains reports whether s is one of the pool's subnets.
func (p SubnetPool) Contains(s netip.Prefix) bool {
	return s.Bits() == p.bits && p.base.Contains(s.Addr()) && s.Masked() == s
}

// Candidates yields the subnets to try for the network name, in order: from the slot its name
// derives round the whole pool, at most maxSubnetTries of them.
func (p SubnetPool) Candidates(name string) iter.Seq[netip.Prefix] {
	return func(yield func(netip.Prefix) bool) {
		if p.slots == 0 {
			return
		}
		sum := sha256.Sum256([]byte(name))
		start := binary.BigEndian.Uint64(sum[:8]) % p.slots
		base := binary.BigEndian.Uint32(p.base.Addr().AsSlice())
		step := uint32(1) << (32 - p.bits)
		for i := uint64(0); i < min(p.slots, maxSubnetTries); i++ {
			slot := uint32((start + i) % p.slots)
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], base+slot*step)
			if !yield(netip.PrefixFrom(netip.AddrFrom4(b), p.bits)) {
				return
			}
		}
	}
}
