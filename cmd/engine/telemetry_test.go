package main

import (
	"net"
	"net/http"
	"testing"

	"go.uber.org/zap"
)

// TestServeMetricsBindsLoopbackForABarePort: ":0" serves /metrics on 127.0.0.1, never on every
// interface; an address that is not host:port is refused before anything listens; no address
// is no endpoint and no instruments.
func TestServeMetricsBindsLoopbackForABarePort(t *testing.T) {
	if p, err := serveMetrics("", zap.NewNop()); err != nil || p != nil || p.Metrics() != nil {
		t.Fatalf("empty listen: %v, %v; want no endpoint", p, err)
	}
	if _, err := serveMetrics("9464", zap.NewNop()); err == nil {
		t.Fatal("a listen address without a port separator was accepted")
	}
	p, err := serveMetrics(":0", zap.NewNop())
	if err != nil {
		t.Fatalf("serveMetrics(:0): %v", err)
	}
	defer closeMetrics(p, zap.NewNop())
	host, _, _ := net.SplitHostPort(p.Addr())
	if host != "127.0.0.1" {
		t.Fatalf("a bare port listens on %s, want loopback", p.Addr())
	}
	resp, err := http.Get("http://" + p.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
}
