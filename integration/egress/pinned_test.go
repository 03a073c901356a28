package egress

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestEgressPinnedClientFailsClosed (pinned clients fail closed with a decision that says
// so): against the real engine, a workload client that trusts only the
// target's own CA (as a client pinned to the origin's certificate, or one that ignores
// SSL_CERT_FILE, does) refuses the proxy's certificate for an inspected host, and a
// ClientHello naming another host than the CONNECT is refused. The target logs nothing, and
// the drained window holds one DENY for each that says why, distinct from a host the
// allowlist does not name.
func TestEgressPinnedClientFailsClosed(t *testing.T) {
	w := acquireInspected(t, sandbox.EgressRule{Host: allowedHost, Methods: []string{"GET"}, Paths: []string{"/allowed/**"}})
	fx, b, sink, key, n := w.fx, w.b, w.sink, w.key, w.name
	ctx := itest.Context(t)
	run := func(argv ...string) string { t.Helper(); return w.run(t, argv...) }
	// The target's CA, not the proxy's: the client refuses the proxy's leaf.
	if out := run("maf-e2e", "get", "https://"+allowedHost+"/allowed/x", fx.caB64); !strings.HasPrefix(out, "code=000") ||
		!strings.Contains(out, "certificate") {
		t.Fatalf("a client pinned to the target's CA: %s, want a refused certificate", out)
	}
	payload := base64.StdEncoding.EncodeToString([]byte("GET /allowed/x HTTP/1.1\r\nHost: " + allowedHost + "\r\nConnection: close\r\n\r\n"))
	if out := run("maf-e2e", "raw", allowedHost, deniedHost, "http/1.1", payload); out != "handshake=failed" {
		t.Fatalf("a ClientHello for another host: %s, want handshake=failed", out)
	}
	for _, line := range strings.Split(dockertest.Docker(t, "logs", fx.ids[allowedHost]), "\n") {
		if strings.HasPrefix(line, "request ") {
			t.Fatalf("the target saw %q", line)
		}
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	ws := sink.got()
	if len(ws) != 1 {
		t.Fatalf("windows: %+v, want exactly one", ws)
	}
	want := []sandbox.EgressDecision{
		{Decision: sandbox.DecisionDeny, Host: allowedHost, Port: 443, TLS: egresslog.TLSAlertReason(42)}, // bad_certificate: Go's client
		{Decision: sandbox.DecisionDeny, Host: allowedHost, Port: 443, TLS: egresslog.TLSSNIMismatch},
	}
	got := ws[0].Decisions
	if len(got) != len(want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		g.At = time.Time{}
		if g != want[i] {
			t.Errorf("decision %d: %+v, want %+v", i, g, want[i])
		}
	}
	if err := b.AwaitTeardowns(ctx); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
}
