package docker

import (
	"errors"
	"net/netip"
	"testing"
)

func TestSubnetPoolCandidates(t *testing.T) {
	p, err := NewSubnetPool(netip.MustParsePrefix(DefaultEgressSubnetPool), EgressSubnetBits)
	if err != nil {
		t.Fatal(err)
	}
	if p.size() != 8192 {
		t.Fatalf("size = %d", p.size())
	}
	var first netip.Prefix
	seen := map[netip.Prefix]bool{}
	for s := range p.Candidates("maf-abc-net") {
		if !first.IsValid() {
			first = s
		}
		if !p.Contains(s) || seen[s] {
			t.Fatalf("candidate %s outside the pool or repeated", s)
		}
		seen[s] = true
	}
	if len(seen) != maxSubnetTries {
		t.Fatalf("%d candidates, want %d", len(seen), maxSubnetTries)
	}
	// The same name starts at the same slot in every process; another name elsewhere.
	for s := range p.Candidates("maf-abc-net") {
		if s != first {
			t.Fatalf("start moved: %s then %s", first, s)
		}
		break
	}
	for s := range p.Candidates("maf-abd-net") {
		if s == first {
			t.Fatalf("two names start at one slot %s (possible, but not for these)", s)
		}
		break
	}
	// A small pool is walked whole, wrapping round.
	small, _ := NewSubnetPool(netip.MustParsePrefix("10.9.0.0/27"), 29)
	n := 0
	for range small.Candidates("x") {
		n++
	}
	if n != 4 {
		t.Fatalf("small pool yielded %d, want 4", n)
	}
}

func TestSubnetPoolRefusals(t *testing.T) {
	for _, c := range []struct {
		base string
		bits int
	}{{"fd00::/64", 120}, {"10.0.0.0/16", 8}, {"10.0.0.0/16", 31}} {
		if _, err := NewSubnetPool(netip.MustParsePrefix(c.base), c.bits); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s /%d: err = %v", c.base, c.bits, err)
		}
	}
}

func TestTopologyFor(t *testing.T) {
	for v, want := range map[string]Topology{"20.10.24+dfsg1": TopologyInhibitIPv4, "27.5.1": TopologyInhibitIPv4,
		"28.0.0": TopologyIsolatedGateway, "29.1.0-rc.1": TopologyIsolatedGateway} {
		if got, err := TopologyFor(v); err != nil || got != want {
			t.Errorf("TopologyFor(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
	for _, v := range []string{"", "dev", "v28"} {
		if _, err := TopologyFor(v); !errors.Is(err, ErrInvalid) {
			t.Errorf("TopologyFor(%q) accepted", v)
		}
	}
}
