package proxy

import (
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// TestInspectShadowPassesAndSays: under a shadow rule a request the rule does not permit,
// or whose path is not normal, reaches the origin and its decision says WOULD-DENY with the
// origin's status and the bytes each way; a request the enforcer refuses whatever the rule (a
// Host header for another host) is still refused; a permitted one is an ordinary ALLOW.
func TestInspectShadowPassesAndSays(t *testing.T) {
	rule := acmeReadOnly
	rule.Shadow = true
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	got := send(t, conn, get("/repos/acme/a")+"POST /admin HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\n{}"+
		get("/repos/acme/%2e%2e/admin")+get("/repos//acme")+"GET /repos/acme/a HTTP/1.1\r\nHost: other.example\r\n\r\n", 5)
	if len(got) != 5 || !strings.HasPrefix(got[0], "200 OK") || !strings.HasPrefix(got[1], "200 OK") || !strings.HasPrefix(got[2], "200 OK") ||
		!strings.HasPrefix(got[3], "200 OK") || !strings.HasPrefix(got[4], "403") {
		t.Fatalf("answers %q, want 200, then 200 three times (shadow), 403", got)
	}
	if seen := rt.requests(); !slices.Equal(seen, []string{"GET /repos/acme/a", "POST /admin", "GET /repos/acme/%2e%2e/admin", "GET /repos//acme"}) {
		t.Fatalf("the origin saw %q", seen)
	}
	// A target the log and the upstream could not carry as sent is refused in shadow too.
	malformed, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	if got := send(t, malformed, get("/repos/acme/a#frag"), 1); !strings.HasPrefix(got[0], "403") {
		t.Fatalf("a fragment under a shadow rule: %q, want 403", got)
	}
	malformed.Close()
	conn.Close()
	tp.Close()
	ds, _, err := egresslog.ParseLog(strings.NewReader(tp.log.String()))
	if err != nil || len(ds) != 6 {
		t.Fatalf("decisions %+v (%v) from %q", ds, err, tp.log.String())
	}
	for i, want := range []struct {
		code   sandbox.EgressDecisionCode
		method string
		status int
		sent   bool
	}{{sandbox.DecisionAllow, "GET", 200, true}, {sandbox.DecisionWouldDeny, "POST", 200, true}, {sandbox.DecisionWouldDeny, "GET", 200, true},
		{sandbox.DecisionWouldDeny, "GET", 200, true}, {sandbox.DecisionDeny, "GET", 403, false}, {sandbox.DecisionDeny, "GET", 403, false}} {
		d := ds[i]
		if d.Decision != want.code || d.Method != want.method || d.Status != want.status || d.Rule != inspectHost ||
			(d.BytesOut > 0) != want.sent || (d.BytesIn > 0) != want.sent {
			t.Errorf("decision %d: %+v, want %s %s status %d, bytes each way: %v", i, d, want.code, want.method, want.status, want.sent)
		}
	}
}

// TestInspectRefusesMethodsTheLogCannotName: a lower-case method is refused, so no request
// passes without its decision line.
func TestInspectRefusesMethodsTheLogCannotName(t *testing.T) {
	rule := sandbox.EgressRule{Host: inspectHost, Paths: []string{"/**"}} // every method
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	if got := send(t, conn, "get /x HTTP/1.1\r\nHost: example.com\r\n\r\n", 1); !strings.HasPrefix(got[0], "403") {
		t.Fatalf("answer %q, want 403", got)
	}
	if seen := rt.requests(); len(seen) != 0 {
		t.Fatalf("the origin saw %q", seen)
	}
	if log := tp.log.String(); log != "DENY example.com:443 INVALID /x status=403 out=0 in=0 rule=example.com\n" {
		t.Fatalf("decision log %q", log)
	}
}

// TestInspectLogsARequestCutAtStop: a response still streaming when the proxy stops is cut,
// and its request's decision is written at the stop with what was relayed, not lost.
func TestInspectLogsARequestCutAtStop(t *testing.T) {
	rt := startRecordingTarget(t)
	release := make(chan struct{})
	defer close(release)
	rt.hook(func(string, string) { <-release }) // the origin answers nothing until the test ends
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(get("/repos/acme/slow"))); err != nil {
		t.Fatal(err)
	}
	// The request reached the origin once it is recorded; then stop the proxy under it.
	for len(rt.requests()) == 0 {
		runtime.Gosched()
	}
	tp.Close()
	ds, _, err := egresslog.ParseLog(strings.NewReader(tp.log.String()))
	if err != nil || len(ds) != 1 || ds[0].Decision != sandbox.DecisionAllow || ds[0].Status != 0 || ds[0].BytesOut == 0 {
		t.Fatalf("decisions %+v (%v): want the ALLOW of the cut request, status 0, its bytes out", ds, err)
	}
}

// TestInspectLogsARequestCutInTheHandshakeAtStop: a permitted request whose upstream TLS
// handshake the proxy's stop cuts got no answer, so it is logged as cut (status 0, nothing
// relayed), not as an unreachable destination answered 502.
func TestInspectLogsARequestCutInTheHandshakeAtStop(t *testing.T) {
	// An origin that takes the connection and never answers the handshake.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hello := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := c.Read(make([]byte, 1)); err == nil {
			close(hello) // the proxy's ClientHello: it is in the handshake
		}
		_, _ = io.Copy(io.Discard, c)
	}()
	res := &stubResolver{answers: map[string][]netip.Addr{inspectHost: addrs("127.0.0.1")}}
	tp := startProxy(t, []string{inspectHost}, WithResolver(res), withAdmitLoopback(),
		withDialPort(ln.Addr().(*net.TCPAddr).Port), WithInspect(acmeReadOnly))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(get("/repos/acme/x"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hello:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy never started the upstream handshake")
	}
	tp.Close()
	if log := tp.log.String(); log != "ALLOW example.com:443 GET /repos/acme/x status=0 out=0 in=0 rule=example.com\n" {
		t.Fatalf("decision log %q: want the permitted request, cut with nothing relayed", log)
	}
}
