package proxy

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
)

func TestSealTargets(t *testing.T) {
	own := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/8"),
		netip.MustParsePrefix("10.213.0.3/29"),
	}
	extra := []netip.Addr{netip.MustParseAddr("172.17.0.1"), netip.MustParseAddr("10.213.0.3"), netip.MustParseAddr("127.0.0.1")}
	got := sealTargets(own, extra, nil)
	want := []string{"10.213.0.1", "10.213.0.2", "10.213.0.4", "10.213.0.5", "10.213.0.6", "172.17.0.1"}
	var s []string
	for _, a := range got {
		s = append(s, a.String())
	}
	if !slices.Equal(s, want) {
		t.Fatalf("targets = %v, want %v (gateway, the segment's other hosts, the extras; never itself, loopback or broadcast)", s, want)
	}
	// The workload's own address is skipped: it may be up there, gated.
	got = sealTargets(own, nil, []netip.Addr{netip.MustParseAddr("10.213.0.6")})
	if slices.Contains(got, netip.MustParseAddr("10.213.0.6")) || len(got) != 4 {
		t.Fatalf("targets with the workload's address skipped = %v, want the gateway and .2, .4, .5", got)
	}
	// A wide segment is tried at its gateway only.
	got = sealTargets([]netip.Prefix{netip.MustParsePrefix("10.0.5.7/16")}, nil, nil)
	if len(got) != 1 || got[0].String() != "10.0.0.1" {
		t.Fatalf("wide segment targets = %v, want only the gateway", got)
	}
}

// A listener answers, a closed port resets: both are reach. The probe's own TCP attempt is
// what the integration tests aim at real bridges.
func TestTryTCPSeesAnswersAndResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx := context.Background()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	if s := tryTCP(ctx, ap, time.Second); !strings.Contains(s, "accepted") {
		t.Fatalf("open port: %q", s)
	}
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	cp := netip.MustParseAddrPort(closed.Addr().String())
	closed.Close()
	if s := tryTCP(ctx, cp, time.Second); !strings.Contains(s, "reset") {
		t.Fatalf("closed port: %q", s)
	}
	if s := tryUDP(ctx, cp, 200*time.Millisecond); !strings.Contains(s, "port-unreachable") {
		t.Fatalf("closed udp port: %q", s)
	}
}

func TestProbeSealReportsAnIPv6Address(t *testing.T) {
	rep, err := ProbeSeal(context.Background(), SealConfig{Budget: 10 * time.Millisecond,
		Interfaces: func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("fe80::2/64")}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sealed() || !strings.Contains(strings.Join(rep.Breaches, ";"), "IPv6") {
		t.Fatalf("report = %+v, want the IPv6 address named", rep)
	}
}

func TestSealTargetsFromEnv(t *testing.T) {
	got, err := SealTargetsFromEnv(" 172.17.0.1, ,10.0.0.1")
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := SealTargetsFromEnv("nope"); err == nil {
		t.Fatal("a bad address was accepted")
	}
	if egresslog.FormatSealTargets(got) != "172.17.0.1,10.0.0.1" {
		t.Fatal(egresslog.FormatSealTargets(got))
	}
}
