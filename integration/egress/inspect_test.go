package egress

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// Request-level egress on the real engine: an entry allowing only GET under
// /allowed/ on the HTTPS target. The workload trusts the proxy's CA through SSL_CERT_FILE
// alone (the client is given no CA), the allowed GET reaches the target, a POST and a GET on
// another path are refused with 403 and the target never sees them, and the drained window
// carries each decision with its method, path, status, bytes each way and rule. A request
// answered 103 Early Hints first and one that waits for 100 Continue before its body are
// each one decision with the final status. Under a shadow entry for the other target, a
// path that is not normal passes as WOULD-DENY.
func TestEgressInspectedMethodsAndPaths(t *testing.T) {
	w := acquireInspected(t, sandbox.EgressRule{Host: allowedHost, Methods: []string{"GET"}, Paths: []string{"/allowed/**"}},
		sandbox.EgressRule{Host: deniedHost, Methods: []string{"GET"}, Paths: []string{"/ok/**"}, Shadow: true})
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
	get := func(path, extra string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + allowedHost + "\r\n" + extra + "\r\n"
	}
	if out := run("maf-e2e", "send", "GET", base+"/allowed/x"); out != "code=200" {
		t.Fatalf("allowed GET: %s", out)
	}
	if out := run("maf-e2e", "send", "POST", base+"/allowed/x"); out != "code=403" {
		t.Fatalf("POST on an allowed path: %s, want the proxy's 403", out)
	}
	if out := run("maf-e2e", "send", "GET", base+"/other"); out != "code=403" {
		t.Fatalf("GET on another path: %s, want the proxy's 403", out)
	}
	hinted := get("/allowed/h?e2e=hints", "") + get("/allowed/y", "Connection: close\r\n")
	if out := run("maf-e2e", "raw", allowedHost, allowedHost, "http/1.1", base64.StdEncoding.EncodeToString([]byte(hinted))); out !=
		"alpn=http/1.1\nstatus=103\nstatus=200\nstatus=200" {
		t.Fatalf("103 Early Hints, then a pipelined GET: %q", out)
	}
	if out := run("sh", "-c", `E2E_BODY=hello maf-e2e send GET `+base+`/allowed/e "Expect: 100-continue"`); !strings.HasPrefix(out, "code=200") {
		t.Fatalf("a GET that waits for 100 Continue: %s", out)
	}
	if out := run("maf-e2e", "send", "GET", "https://"+deniedHost+"/ok/%2e%2e/x"); out != "code=200" {
		t.Fatalf("a path that is not normal, under a shadow entry: %s, want it passed", out)
	}
	var seen []string
	for _, line := range strings.Split(dockertest.Docker(t, "logs", fx.ids[allowedHost]), "\n") {
		if strings.HasPrefix(line, "request ") {
			seen = append(seen, line)
		}
	}
	if want := "request GET /allowed/x|request GET /allowed/h|request GET /allowed/y|request GET /allowed/e"; strings.Join(seen, "|") != want {
		t.Fatalf("the target saw %q, want only the allowed GETs", seen)
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
		{Decision: sandbox.DecisionAllow, Host: allowedHost, Port: 443, Method: "GET", Path: "/allowed/h", Status: 200, Rule: allowedHost},
		{Decision: sandbox.DecisionAllow, Host: allowedHost, Port: 443, Method: "GET", Path: "/allowed/y", Status: 200, Rule: allowedHost},
		{Decision: sandbox.DecisionAllow, Host: allowedHost, Port: 443, Method: "GET", Path: "/allowed/e", Status: 200, Rule: allowedHost},
		{Decision: sandbox.DecisionWouldDeny, Host: deniedHost, Port: 443, Method: "GET", Path: "/ok/%2e%2e/x", Status: 200, Rule: deniedHost},
	}
	got := ws[0].Decisions
	if len(got) != len(want) {
		t.Fatalf("decisions %+v, want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		g.At = time.Time{}
		// A passed request went out and came back; a refusal sent nothing either way.
		if relayed := g.Decision != sandbox.DecisionDeny; (g.BytesOut > 0) != relayed || (g.BytesIn > 0) != relayed {
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
