package proxy

import (
	"net/netip"
	"testing"
)

func TestIsGlobal(t *testing.T) {
	cases := []struct {
		addr string
		want bool
	}{
		// Global.
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.216.34", true},
		{"2606:4700:4700::1111", true},
		{"2a00:1450:4001::1", true},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::808:808", true}, // NAT64 of 8.8.8.8
		{"192.0.1.1", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"198.17.255.255", true},
		{"198.20.0.0", true},
		{"223.255.255.255", true},
		{"2001:1::1", true},
		{"2001:1::2", true},
		{"2001:1::3", true},
		{"2001:3::1", true},
		{"2001:4:112::1", true},
		{"2001:20::1", true},
		{"2001:30::1", true},
		{"2001:200::1", true}, // outside 2001::/23
		// Unspecified and loopback.
		{"0.0.0.0", false},
		{"::", false},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"::1", false},
		// Private.
		{"10.0.0.1", false},
		{"10.213.0.5", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		// Link-local, metadata.
		{"169.254.169.254", false},
		{"169.254.0.1", false},
		{"fe80::1", false},
		{"fe80::1%eth0", false},
		{"168.63.129.16", false},
		{"100.100.100.200", false},
		{"fd00:ec2::254", false},
		{"fd20:ce::254", false},
		// Multicast.
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		// Special-purpose IPv4.
		{"0.1.2.3", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"192.0.0.9", false}, // the spec refuses all of 192.0.0.0/24
		{"192.0.0.170", false},
		{"192.0.2.1", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},
		// Special-purpose IPv6.
		{"2001:db8::1", false},
		{"64:ff9b:1::1", false},
		{"100::1", false},
		{"2001::1", false},
		{"2001:2::1", false},
		{"2001:1::4", false},
		{"2001:10::1", false},
		{"2001:1ff:ffff::1", false},
		{"2002:0a00:0001::1", false}, // 6to4 (stricter)
		{"3fff::1", false},           // documentation (stricter)
		{"fec0::1", false},           // site-local (stricter)
		{"::10.0.0.1", false},        // IPv4-compatible (stricter)
		// Embedded IPv4 judged by itself.
		{"::ffff:10.0.0.1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"64:ff9b::a00:1", false},     // NAT64 of 10.0.0.1
		{"64:ff9b::a9fe:a9fe", false}, // NAT64 of 169.254.169.254
	}
	for _, tc := range cases {
		t.Run(tc.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			if got := isGlobal(a); got != tc.want {
				t.Fatalf("isGlobal(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
	if isGlobal(netip.Addr{}) {
		t.Fatal("the zero Addr is global")
	}
}

// TestPrivateAllowance checks §2.3a: the operator's blocks admit private destinations, but
// never loopback, link-local, metadata, or a non-destination, whatever they cover.
func TestPrivateAllowance(t *testing.T) {
	everything := destPolicy{private: prefixes("0.0.0.0/0", "::/0")}
	subnet := destPolicy{private: prefixes("10.213.0.0/24")}
	none := destPolicy{}
	cases := []struct {
		name   string
		policy destPolicy
		addr   string
		want   bool
	}{
		{"global without allowance", none, "8.8.8.8", true},
		{"private without allowance", none, "10.213.0.5", false},
		{"inside the block", subnet, "10.213.0.5", true},
		{"mapped inside the block", subnet, "::ffff:10.213.0.5", true},
		{"outside the block", subnet, "10.214.0.5", false},
		{"global still global", subnet, "1.1.1.1", true},
		{"block covers a private v6", destPolicy{private: prefixes("fd12::/16")}, "fd12::5", true},
		{"everything: private", everything, "192.168.1.1", true},
		{"everything: CGNAT", everything, "100.64.0.1", true},
		{"everything: loopback", everything, "127.0.0.1", false},
		{"everything: v6 loopback", everything, "::1", false},
		{"everything: mapped loopback", everything, "::ffff:127.0.0.1", false},
		{"everything: link-local metadata", everything, "169.254.169.254", false},
		{"everything: v6 link-local", everything, "fe80::1", false},
		{"everything: Azure wire server", everything, "168.63.129.16", false},
		{"everything: Alibaba metadata", everything, "100.100.100.200", false},
		{"everything: AWS v6 metadata", everything, "fd00:ec2::254", false},
		{"everything: GCP v6 metadata", everything, "fd20:ce::254", false},
		{"everything: unspecified", everything, "0.0.0.0", false},
		{"everything: this network", everything, "0.1.2.3", false},
		{"everything: broadcast", everything, "255.255.255.255", false},
		{"everything: multicast", everything, "224.0.0.1", false},
		{"everything: NAT64 of loopback", everything, "64:ff9b::7f00:1", false},
		{"test loopback hook", destPolicy{admitLoopback: true}, "127.0.0.1", true},
		{"test loopback hook is loopback only", destPolicy{admitLoopback: true}, "10.0.0.1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.permits(netip.MustParseAddr(tc.addr)); got != tc.want {
				t.Fatalf("permits(%s) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}

func TestWithPrivateCIDRs(t *testing.T) {
	var o options
	if err := WithPrivateCIDRs(netip.MustParsePrefix("10.213.0.77/24"), netip.MustParsePrefix("::ffff:10.214.0.0/120"))(&o); err != nil {
		t.Fatal(err)
	}
	want := prefixes("10.213.0.0/24", "10.214.0.0/24")
	if len(o.private) != 2 || o.private[0] != want[0] || o.private[1] != want[1] {
		t.Fatalf("got %v, want %v", o.private, want)
	}
	if err := WithPrivateCIDRs(netip.Prefix{})(&o); err == nil {
		t.Fatal("invalid prefix accepted")
	}
}
