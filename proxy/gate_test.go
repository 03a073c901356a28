package proxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
)

func TestGateConfig(t *testing.T) {
	token := strings.Repeat("ab", 16)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, _, ok, err := GateConfig(env(nil)); ok || err != nil {
		t.Fatalf("no release asked: ok %v err %v", ok, err)
	}
	addr, tok, ok, err := GateConfig(env(map[string]string{egresslog.EnvGateListen: "10.213.0.2:3129", egresslog.EnvGateToken: token}))
	if err != nil || !ok || addr.String() != "10.213.0.2:3129" || tok != token {
		t.Fatalf("GateConfig = %v %q %v %v", addr, tok, ok, err)
	}
	for _, m := range []map[string]string{
		{egresslog.EnvGateListen: "10.213.0.2", egresslog.EnvGateToken: token},
		{egresslog.EnvGateListen: "10.213.0.2:3129", egresslog.EnvGateToken: "short"},
		{egresslog.EnvGateListen: "10.213.0.2:3129"},
	} {
		if _, _, _, err := GateConfig(env(m)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("GateConfig(%v) = %v, want ErrInvalidConfig", m, err)
		}
	}
}

// Every connection gets the token, one after another, including one made after an earlier
// hand-over (a restarted gate); cancellation ends the service.
func TestServeGateHandsTheTokenToEveryConnection(t *testing.T) {
	token := strings.Repeat("cd", 16)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := ListenGate(ctx, netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- ServeGate(ctx, ln, token) }()
	for range 3 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || line != token+"\n" {
			t.Fatalf("read %q, %v; want the token and a newline", line, err)
		}
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeGate after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeGate did not return after cancel")
	}
}
