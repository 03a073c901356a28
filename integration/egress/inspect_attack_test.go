package egress

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// TestEgressInspectAttacks: against the real engine, with an entry that
// allows only GET under /allowed/ on the HTTPS target (which logs every request it gets), each
// attack is sent from inside the workload over a raw TLS connection through its proxy
// (`maf-e2e raw`), and the test checks what the workload was answered and what reached the
// target: nothing but what the rule permits ever does.
func TestEgressInspectAttacks(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network, actors.WithEgressUpstreamCAs(fx.caPEM))
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(images.ClientTag), sandbox.WithAllowlist(
		sandbox.EgressRule{Host: allowedHost, Methods: []string{"GET"}, Paths: []string{"/allowed/**"}}))
	if err != nil {
		t.Fatal(err)
	}
	key := itest.NewKey(t)
	ctx := itest.Context(t)
	sb := itest.Acquire(t, b, key, spec)
	t.Cleanup(func() { _ = b.Dispose(ctx, key, sandbox.DisposeOptions{}) })
	seen := func() []string {
		var lines []string
		for _, line := range strings.Split(dockertest.Docker(t, "logs", fx.ids[allowedHost]), "\n") {
			if strings.HasPrefix(line, "request ") {
				lines = append(lines, line)
			}
		}
		return lines
	}
	const h = "Host: " + allowedHost + "\r\n"
	get := func(path, extra string) string { return "GET " + path + " HTTP/1.1\r\n" + h + extra + "\r\n" }
	closing := "Connection: close\r\n"
	cases := []struct {
		name, sni, alpn, payload string
		want                     string   // the workload's output
		reached                  []string // what the target logged
	}{
		{name: "the allowed GET", payload: get("/allowed/x", closing), want: "alpn=http/1.1\nstatus=200", reached: []string{"request GET /allowed/x"}},
		{name: "denied method", payload: "POST /allowed/x HTTP/1.1\r\n" + h + "Content-Length: 0\r\n\r\n", want: "alpn=http/1.1\nstatus=403"},
		{name: "dot-dot", payload: get("/allowed/../denied", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "encoded dots", payload: get("/allowed/%2e%2e/denied", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "encoded slash", payload: get("/allowed%2Fx", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "double slash", payload: get("/allowed//x", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "fragment", payload: get("/allowed/x#frag", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "very long path", payload: get("/allowed/"+strings.Repeat("a", 5000), ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "domain fronting: SNI names another host", sni: deniedHost, payload: get("/allowed/x", closing), want: "handshake=failed"},
		{name: "Host header other than the SNI", payload: "GET /allowed/x HTTP/1.1\r\nHost: " + deniedHost + "\r\n\r\n", want: "alpn=http/1.1\nstatus=403"},
		{name: "smuggling: Content-Length with Transfer-Encoding",
			payload: "GET /allowed/x HTTP/1.1\r\n" + h + "Content-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + get("/denied", ""),
			want:    "alpn=http/1.1\nstatus=200\nstatus=403", reached: []string{"request GET /allowed/x"}},
		{name: "smuggling: two requests in one write", payload: get("/allowed/x", "") + get("/denied", closing),
			want: "alpn=http/1.1\nstatus=200\nstatus=403", reached: []string{"request GET /allowed/x"}},
		{name: "HTTP/2 only is refused at the handshake", alpn: "h2", payload: get("/denied", closing), want: "handshake=failed"},
		{name: "HTTP/2 preface after falling back", alpn: "h2,http/1.1", payload: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", want: "alpn=http/1.1\nstatus=403"},
		{name: "WebSocket upgrade on a denied path", payload: get("/denied", "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
			want: "alpn=http/1.1\nstatus=403"},
		{name: "WebSocket upgrade on an allowed path", payload: get("/allowed/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"),
			want: "alpn=http/1.1\nstatus=403"},
		// Informational responses reach the workload as such, each before its request's final
		// response, and a pipelined request gets its own.
		{name: "100 Continue, then a pipelined request",
			payload: "GET /allowed/x HTTP/1.1\r\n" + h + "Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello" + get("/allowed/y", closing),
			want:    "alpn=http/1.1\nstatus=100\nstatus=200\nstatus=200", reached: []string{"request GET /allowed/x", "request GET /allowed/y"}},
		{name: "103 Early Hints, then a pipelined request", payload: get("/allowed/x?e2e=hints", "") + get("/allowed/y", closing),
			want: "alpn=http/1.1\nstatus=103\nstatus=200\nstatus=200", reached: []string{"request GET /allowed/x", "request GET /allowed/y"}},
		// What the proxy normalises: a trailing slash, an encoded slash inside a segment, an
		// encoded dot inside a name; each reaches the target as sent.
		{name: "trailing slash", payload: get("/allowed/x/", closing), want: "alpn=http/1.1\nstatus=200", reached: []string{"request GET /allowed/x/"}},
		{name: "encoded slash inside a segment", payload: get("/allowed/acme%2Fwidgets/issues", closing), want: "alpn=http/1.1\nstatus=200",
			reached: []string{"request GET /allowed/acme%2Fwidgets/issues"}},
		{name: "encoded dot in a file name", payload: get("/allowed/report%2Etxt", closing), want: "alpn=http/1.1\nstatus=200",
			reached: []string{"request GET /allowed/report%2Etxt"}},
		// What it refuses, since a server may read it as another path.
		{name: "encoded slash and dot-dot under the prefix", payload: get("/allowed/x%2F..%2F..%2Fdenied", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "dot-dot with a path parameter", payload: get("/allowed/..;/denied", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "double-encoded dots", payload: get("/allowed/%252e%252e/denied", ""), want: "alpn=http/1.1\nstatus=403"},
		{name: "overlong UTF-8 dots", payload: get("/allowed/%c0%ae%c0%ae/denied", ""), want: "alpn=http/1.1\nstatus=403"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sni := tc.sni
			if sni == "" {
				sni = allowedHost
			}
			alpn := tc.alpn
			if alpn == "" {
				alpn = "http/1.1"
			}
			before := len(seen())
			res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "raw", allowedHost, sni, alpn, base64.StdEncoding.EncodeToString([]byte(tc.payload))), "/", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(res.StdoutBytes)); got != tc.want {
				t.Errorf("the workload got %q, want %q", got, tc.want)
			}
			if got := seen()[before:]; strings.Join(got, "\n") != strings.Join(tc.reached, "\n") {
				t.Errorf("the target got %q, want %q", got, tc.reached)
			}
		})
	}
}
