package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// Request-level egress on the real engine (issue 24): an entry allowing only GET under
// /allowed/ on the HTTPS target. The workload trusts the proxy's CA through SSL_CERT_FILE
// alone (the client is given no CA), the allowed GET reaches the target, a POST and a GET on
// another path are refused with 403 and the target never sees them, and the drained window
// carries each decision with its method, path, status, bytes each way and rule.
func TestEgressInspectedMethodsAndPaths(t *testing.T) {
	w := acquireInspected(t, sandbox.EgressRule{Host: allowedHost, Methods: []string{"GET"}, Paths: []string{"/allowed/**"}})
	fx, b, sink, key, n := w.fx, w.b, w.sink, w.key, w.name
	ctx := itest.Context(t)
	run := func(argv ...string) string { t.Helper(); return w.run(t, argv...) }
	if d := b.Declarations(); !d.EffectiveCapabilities().Has(sandbox.EgressMethods) || !d.EgressPaths {
		t.Fatalf("declarations %+v: want egress methods and paths", d)
	}
	if out := run("sh", "-c", `echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS $CURL_CA_BUNDLE"; head -1 "$SSL_CERT_FILE"`); out !=
		"/maf-sandbox-proxy-ca.pem /maf-sandbox-proxy-ca.pem /maf-sandbox-proxy-ca.pem /maf-sandbox-proxy-ca.pem\n-----BEGIN CERTIFICATE-----" {
		t.Fatalf("trust variables and bundle: %q", out)
	}
	base := "https://" + allowedHost
	if out := run("maf-e2e", "send", "GET", base+"/allowed/x"); out != "code=200" {
		t.Fatalf("allowed GET: %s", out)
	}
	if out := run("maf-e2e", "send", "POST", base+"/allowed/x"); out != "code=403" {
		t.Fatalf("POST on an allowed path: %s, want the proxy's 403", out)
	}
	if out := run("maf-e2e", "send", "GET", base+"/other"); out != "code=403" {
		t.Fatalf("GET on another path: %s, want the proxy's 403", out)
	}
	var seen []string
	for _, line := range strings.Split(dockertest.Docker(t, "logs", fx.ids[allowedHost]), "\n") {
		if strings.HasPrefix(line, "request ") {
			seen = append(seen, line)
		}
	}
	if len(seen) != 1 || seen[0] != "request GET /allowed/x" {
		t.Fatalf("the target saw %q, want only the allowed GET", seen)
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	ws := sink.got()
	if len(ws) != 1 {
		t.Fatalf("windows: %+v, want exactly one", ws)
	}
	want := []sandbox.EgressDecision{
		{Decision: sandbox.DecisionAllow, Host: allowedHost, Port: 443, Method: "GET", Path: "/allowed/x", Status: 200, Rule: allowedHost},
		{Decision: sandbox.DecisionDeny, Host: allowedHost, Port: 443, Method: "POST", Path: "/allowed/x", Status: 403, Rule: allowedHost},
		{Decision: sandbox.DecisionDeny, Host: allowedHost, Port: 443, Method: "GET", Path: "/other", Status: 403, Rule: allowedHost},
	}
	got := ws[0].Decisions
	if len(got) != len(want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		g.At = time.Time{}
		// The allowed GET went out and came back; a refusal sent nothing either way.
		if relayed := g.Decision == sandbox.DecisionAllow; (g.BytesOut > 0) != relayed || (g.BytesIn > 0) != relayed {
			t.Errorf("decision %d: %+v: bytes each way only for the relayed request", i, g)
		}
		g.BytesOut, g.BytesIn = 0, 0
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
