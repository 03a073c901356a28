package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// inspectHost is a name the httptest certificate is valid for.
const inspectHost = "example.com"

// recordingTarget is an HTTPS origin on 127.0.0.1 that records every request it receives.
type recordingTarget struct {
	srv       *httptest.Server
	mu        sync.Mutex
	seen      []string
	onRequest func(auth, other string) // sees the Authorization and X-Other headers
	answer    http.HandlerFunc         // answers instead of "origin saw …" when set
}

// serve makes f answer every request the target records.
func (rt *recordingTarget) serve(f http.HandlerFunc) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.answer = f
}

func (rt *recordingTarget) hook(f func(auth, other string)) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.onRequest = f
}

func startRecordingTarget(t *testing.T) *recordingTarget {
	t.Helper()
	rt := &recordingTarget{}
	rt.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt.mu.Lock()
		rt.seen = append(rt.seen, r.Method+" "+r.RequestURI)
		hook, answer := rt.onRequest, rt.answer
		rt.mu.Unlock()
		if hook != nil {
			hook(r.Header.Get("Authorization"), r.Header.Get("X-Other"))
		}
		if answer != nil {
			answer(w, r)
			return
		}
		_, _ = io.WriteString(w, "origin saw "+r.Method+" "+r.RequestURI)
	}))
	// The proxy dials before it knows whether a request will pass; the handshakes it never
	// finishes are expected here, not news.
	rt.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rt.srv.StartTLS()
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *recordingTarget) requests() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.seen)
}

func (rt *recordingTarget) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(rt.srv.Certificate())
	return pool
}

func (rt *recordingTarget) port() int { return rt.srv.Listener.Addr().(*net.TCPAddr).Port }

// startInspectingProxy serves a proxy that inspects inspectHost with rule, dialling rt.
func startInspectingProxy(t *testing.T, rt *recordingTarget, rule sandbox.EgressRule, opts ...Option) *testProxy {
	t.Helper()
	res := &stubResolver{answers: map[string][]netip.Addr{inspectHost: addrs("127.0.0.1")}}
	return startProxy(t, []string{inspectHost}, append([]Option{WithResolver(res), withAdmitLoopback(),
		withDialPort(rt.port()), WithInspect(rule)}, opts...)...)
}

// connectTLS opens a CONNECT to inspectHost through tp and starts TLS naming sni, trusting
// the proxy's CA.
func connectTLS(t *testing.T, tp *testProxy, sni string) (*tls.Conn, error) {
	t.Helper()
	return connectTLSTrusting(t, tp, tp.CACertificatePEM(), sni)
}

// connectTLSTrusting is connectTLS trusting caPEM, as a client that has only the certificate.
func connectTLSTrusting(t *testing.T, tp *testProxy, caPEM []byte, sni string) (*tls.Conn, error) {
	t.Helper()
	c := tp.dial(t)
	if _, err := io.WriteString(c, "CONNECT "+inspectHost+":443 HTTP/1.1\r\nHost: "+inspectHost+":443\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len("HTTP/1.1 200 Connection Established\r\n\r\n")); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("CONNECT answered %q", got)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the proxy's CA certificate does not parse")
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	return tc, tc.Handshake()
}

// send writes raw (one or more requests in one write) and reads n responses.
func send(t *testing.T, tc *tls.Conn, raw string, n int) []string {
	t.Helper()
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(tc)
	var out []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			out = append(out, "no response: "+err.Error())
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, resp.Status+" "+string(body))
	}
	return out
}

func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: " + inspectHost + "\r\n\r\n" }

var acmeReadOnly = sandbox.EgressRule{Host: inspectHost, Methods: []string{"GET"}, Paths: []string{"/repos/acme/**"}}

// TestInspectAllowsAndDenies: against an origin that records every request, the permitted
// GET reaches it and each refused request is answered 403 with nothing reaching it; every
// request is one decision line with its method and path.
func TestInspectAllowsAndDenies(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want string // the response's status
		log  string // the decision line
	}{
		{"allowed get", get("/repos/acme/widgets?page=2"), "200 OK", "ALLOW example.com:443 GET /repos/acme/widgets status=200 out="},
		{"denied method", "POST /repos/acme/widgets HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\n{}", "403 Forbidden", "DENY example.com:443 POST /repos/acme/widgets status=403 out=0 in=0 rule=example.com\n"},
		{"denied path", get("/repos/other/x"), "403 Forbidden", "DENY example.com:443 GET /repos/other/x"},
		{"prefix at a segment boundary", get("/repos/acmex"), "403 Forbidden", "DENY example.com:443 GET /repos/acmex"},
		{"dot-dot", get("/repos/acme/../admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/../admin"},
		{"encoded dots", get("/repos/acme/%2e%2e/admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/%2e%2e/admin"},
		{"encoded slash", get("/repos/acme%2Fx"), "403 Forbidden", "DENY example.com:443 GET /repos/acme%2Fx"},
		{"encoded slash out of the prefix", get("/repos/acme%2F..%2Fother"), "403 Forbidden", "DENY example.com:443 GET /repos/acme%2F..%2Fother"},
		{"encoded slash and dot-dot under the prefix", get("/repos/acme/x%2F..%2F..%2Fadmin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/x%2F..%2F..%2Fadmin"},
		{"encoded slash inside a segment", get("/repos/acme/group%2Fproject/issues"), "200 OK", "ALLOW example.com:443 GET /repos/acme/group%2Fproject/issues status=200"},
		{"trailing slash", get("/repos/acme/x/"), "200 OK", "ALLOW example.com:443 GET /repos/acme/x/ status=200"},
		{"encoded dot in a file name", get("/repos/acme/report%2Etxt"), "200 OK", "ALLOW example.com:443 GET /repos/acme/report%2Etxt status=200"},
		{"mixed encoded dots", get("/repos/acme/.%2E/admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/.%2E/admin"},
		{"double-encoded dots", get("/repos/acme/%252e%252e/admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/%252e%252e/admin"},
		{"dot-dot with a path parameter", get("/repos/acme/..;/admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/..;/admin"},
		{"overlong UTF-8 dots", get("/repos/acme/%c0%ae%c0%ae/admin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/%c0%ae%c0%ae/admin"},
		{"encoded backslash", get("/repos/acme/..%5cadmin"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/..%5cadmin"},
		{"double slash", get("/repos//acme/x"), "403 Forbidden", "DENY example.com:443 GET /repos//acme/x"},
		{"fragment", get("/repos/acme/x#y"), "403 Forbidden", "DENY example.com:443 GET /repos/acme/x#y"},
		{"very long path", get("/repos/acme/" + strings.Repeat("a", maxRequestPath)), "403 Forbidden", "DENY example.com:443 GET /repos/acme/aaa"},
		{"host header for another host", "GET /repos/acme/x HTTP/1.1\r\nHost: other.example\r\n\r\n", "403 Forbidden", "DENY example.com:443 GET /repos/acme/x"},
		{"head over 64 KiB", "GET /repos/acme/x HTTP/1.1\r\nHost: example.com\r\nX-Big: " + strings.Repeat("b", maxHead) + "\r\n\r\n", "400 Bad Request", ""},
		{"websocket upgrade", "GET /repos/acme/x HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "403 Forbidden", "DENY example.com:443 GET /repos/acme/x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := startRecordingTarget(t)
			tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()))
			conn, err := connectTLS(t, tp, inspectHost)
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
				t.Fatalf("negotiated %q: only HTTP/1.1 is served", p)
			}
			got := send(t, conn, tc.raw, 1)
			if !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("answer %q, want %s", got, tc.want)
			}
			seen := rt.requests()
			if allowed := tc.want == "200 OK"; allowed != (len(seen) == 1) {
				t.Fatalf("the origin saw %q", seen)
			} else if allowed && "GET "+strings.Fields(tc.raw)[1] != seen[0] {
				t.Fatalf("the origin saw %q, want the target as sent", seen)
			}
			conn.Close()
			tp.Close() // waits for the handler: an allowed request's line follows its response
			if log := tp.log.String(); tc.log == "" && log != "" {
				t.Fatalf("decision log %q for a request that was never read whole", log)
			} else if tc.log != "" && (!strings.Contains(log, tc.log) || strings.Count(log, "\n") != 1) {
				t.Fatalf("decision log %q, want exactly one line containing %q", log, tc.log)
			}
		})
	}
}

// TestInspectEachPipelinedRequest: two requests in one write are decided one by one; the
// denied second one never reaches the origin.
func TestInspectEachPipelinedRequest(t *testing.T) {
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	got := send(t, conn, get("/repos/acme/a")+"DELETE /repos/acme/a HTTP/1.1\r\nHost: example.com\r\n\r\n", 2)
	if len(got) != 2 || !strings.HasPrefix(got[0], "200 OK") || !strings.HasPrefix(got[1], "403 Forbidden") {
		t.Fatalf("answers %q, want 200 then 403", got)
	}
	if seen := rt.requests(); !slices.Equal(seen, []string{"GET /repos/acme/a"}) {
		t.Fatalf("the origin saw %q, want only the GET", seen)
	}
}

// TestInspectRefusesAnotherSNI: a ClientHello naming another host than the CONNECT request
// (domain fronting) is refused before any request, and the connection is logged as denied
// with the handshake's reason.
func TestInspectRefusesAnotherSNI(t *testing.T) {
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()))
	tc, err := connectTLS(t, tp, "other.example")
	if err == nil {
		t.Fatal("a handshake for another name succeeded")
	}
	awaitClose(t, tc)
	if seen := rt.requests(); len(seen) != 0 {
		t.Fatalf("the origin saw %q", seen)
	}
	if log := tp.log.String(); log != "DENY example.com:443 tls=sni-mismatch\n" {
		t.Fatalf("decision log %q", log)
	}
}

// awaitClose reads the raw connection under tc until the proxy closes it: its handler has
// returned, so the line it writes before returning is in the log.
func awaitClose(t *testing.T, tc *tls.Conn) {
	t.Helper()
	_, _ = io.Copy(io.Discard, tc.NetConn())
}

// TestInspectNamesARefusedHandshake: a client that does not trust the proxy's CA (its own
// root pool, as a pinned client has) ends the handshake with an alert, and the decision names
// it; a client that hangs up mid-handshake and one that speaks no TLS are named too. None of
// them reaches the origin, and each is one DENY line that says why.
func TestInspectNamesARefusedHandshake(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, tp *testProxy, rt *recordingTarget)
		want string
		opts []Option
	}{
		{"client trusts another CA", func(t *testing.T, tp *testProxy, rt *recordingTarget) {
			otherCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.srv.Certificate().Raw})
			tc, err := connectTLSTrusting(t, tp, otherCA, inspectHost)
			if err == nil {
				t.Fatal("a client that does not trust the proxy's CA completed the handshake")
			}
			awaitClose(t, tc)
		}, "DENY example.com:443 tls=alert-bad-certificate\n", nil},
		{"client hangs up", func(t *testing.T, tp *testProxy, _ *recordingTarget) {
			c := connectRaw(t, tp)
			_ = c.CloseWrite()
			_, _ = io.Copy(io.Discard, c)
		}, "DENY example.com:443 tls=eof\n", nil},
		{"client speaks no TLS", func(t *testing.T, tp *testProxy, _ *recordingTarget) {
			c := connectRaw(t, tp)
			_, _ = io.WriteString(c, get("/repos/acme/x"))
			_, _ = io.Copy(io.Discard, c)
		}, "DENY example.com:443 tls=handshake\n", nil},
		{"client says nothing", func(t *testing.T, tp *testProxy, _ *recordingTarget) {
			c := connectRaw(t, tp)
			_, _ = io.Copy(io.Discard, c) // the proxy hangs up once its head timeout has passed
		}, "DENY example.com:443 tls=timeout\n", []Option{withHeadTimeout(time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := startRecordingTarget(t)
			tp := startInspectingProxy(t, rt, acmeReadOnly, append(tc.opts, WithUpstreamRoots(rt.roots()))...)
			tc.run(t, tp, rt)
			if seen := rt.requests(); len(seen) != 0 {
				t.Fatalf("the origin saw %q", seen)
			}
			if log := tp.log.String(); log != tc.want {
				t.Fatalf("decision log %q, want %q", log, tc.want)
			}
		})
	}
}

// connectRaw opens a CONNECT to inspectHost through tp and returns the tunnel, before TLS.
func connectRaw(t *testing.T, tp *testProxy) *net.TCPConn {
	t.Helper()
	c := tp.dial(t)
	if _, err := io.WriteString(c, "CONNECT "+inspectHost+":443 HTTP/1.1\r\nHost: "+inspectHost+":443\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len("HTTP/1.1 200 Connection Established\r\n\r\n")); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("CONNECT answered %q", got)
	}
	return c
}

// TestInspectVerifiesUpstream: without the origin's CA among the upstream roots, the
// permitted request is not sent (the origin's certificate is not trusted) and is answered
// 502 with an UNREACHABLE decision.
func TestInspectVerifiesUpstream(t *testing.T) {
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, acmeReadOnly) // system roots: the httptest CA is not among them
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	if got := send(t, conn, get("/repos/acme/a"), 1); !strings.HasPrefix(got[0], "502") {
		t.Fatalf("answer %q, want 502", got)
	}
	if seen := rt.requests(); len(seen) != 0 {
		t.Fatalf("the origin saw %q", seen)
	}
	if log := tp.log.String(); log != "UNREACHABLE example.com:443 GET /repos/acme/a status=502 out=0 in=0 rule=example.com\n" {
		t.Fatalf("decision log %q", log)
	}
}

// TestInspectLeavesOtherHostsTunnelled: a host without an inspecting rule is still a byte
// tunnel with today's single decision line.
func TestInspectLeavesOtherHostsTunnelled(t *testing.T) {
	echo := startEcho(t)
	res := &stubResolver{answers: map[string][]netip.Addr{"tunnel.example": addrs("127.0.0.1")}}
	tp := startProxy(t, []string{"tunnel.example", inspectHost}, WithResolver(res), withAdmitLoopback(),
		withDialPort(echo.port()), WithInspect(acmeReadOnly))
	got := tp.exchange(t, "CONNECT tunnel.example:443 HTTP/1.1\r\n\r\nping")
	if got != "HTTP/1.1 200 Connection Established\r\n\r\nping" {
		t.Fatalf("tunnel answered %q", got)
	}
	if log := tp.log.String(); log != "ALLOW tunnel.example:443\n" {
		t.Fatalf("decision log %q", log)
	}
}

func TestWithInspectRefusesBadRules(t *testing.T) {
	for _, r := range []sandbox.EgressRule{{Host: "a.example"}, {Host: "*", Methods: []string{"GET"}}, {Host: "a.example", Paths: []string{"/a/../b"}}} {
		if _, err := New([]string{r.Host}, WithInspect(r)); err == nil {
			t.Errorf("WithInspect(%+v) accepted", r)
		}
	}
	p, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.CACertificatePEM() != nil {
		t.Fatal("a proxy that inspects nothing made a CA")
	}
}

// TestRunInspectsFromEnv: the environment contract carries the inspecting rules and the
// upstream bundle to the process, which announces its CA certificate before it is ready;
// a client trusting that certificate gets the permitted GET through and the POST refused.
func TestRunInspectsFromEnv(t *testing.T) {
	rt := startRecordingTarget(t)
	env := map[string]string{
		egresslog.EnvAllow:       inspectHost,
		egresslog.EnvInspect:     egresslog.FormatInspect([]sandbox.EgressRule{acmeReadOnly}),
		egresslog.EnvUpstreamCAs: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rt.srv.Certificate().Raw})),
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Port = 0
	out := &syncBuffer{}
	res := &stubResolver{answers: map[string][]netip.Addr{inspectHost: addrs("127.0.0.1")}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, cfg, out, WithResolver(res), withAdmitLoopback(), withDialPort(rt.port()),
			withListenHost("127.0.0.1"), withLoopbackOnlyGuard(t))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	ready := regexp.MustCompile(`(?m)^listening on (\d+); allowing: example\.com$`)
	var port string
	for deadline := time.Now().Add(5 * time.Second); port == ""; time.Sleep(10 * time.Millisecond) {
		if m := ready.FindStringSubmatch(out.String()); m != nil {
			port = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no readiness line: %q", out.String())
		}
	}
	der := egresslog.ParseCA(out.String())
	ca, err := x509.ParseCertificate(der)
	if err != nil || !ca.IsCA {
		t.Fatalf("no CA certificate before the readiness line (%v): %q", err, out.String())
	}
	tp := &testProxy{addr: net.JoinHostPort("127.0.0.1", port), log: out}
	conn, err := connectTLSTrusting(t, tp, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	got := send(t, conn, get("/repos/acme/a")+"POST /repos/acme/a HTTP/1.1\r\nHost: example.com\r\n\r\n", 2)
	if len(got) != 2 || !strings.HasPrefix(got[0], "200 OK") || !strings.HasPrefix(got[1], "403 Forbidden") {
		t.Fatalf("answers %q, want 200 then 403", got)
	}
	if seen := rt.requests(); !slices.Equal(seen, []string{"GET /repos/acme/a"}) {
		t.Fatalf("the origin saw %q", seen)
	}
	for _, line := range []string{"ALLOW example.com:443 GET /repos/acme/a status=200 out=", "DENY example.com:443 POST /repos/acme/a status=403 out=0 in=0 rule=example.com\n"} {
		if !strings.Contains(out.String(), line) {
			t.Fatalf("output %q lacks %q", out.String(), line)
		}
	}
}

// TestInspectMemoryOf100Connections: 100 inspected connections held open after one permitted
// request each cost less than the 40 MiB target. The figure is an upper bound: clients, the
// origin and the proxy share this process, and all of their live heap and stacks count.
func TestInspectMemoryOf100Connections(t *testing.T) {
	const n = 100
	rt := startRecordingTarget(t)
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()))
	before := int64(liveBytes())
	conns := make([]*tls.Conn, 0, n)
	for range n {
		conn, err := connectTLS(t, tp, inspectHost)
		if err != nil {
			t.Fatal(err)
		}
		if got := send(t, conn, get("/repos/acme/a"), 1); !strings.HasPrefix(got[0], "200 OK") {
			t.Fatalf("answer %q", got)
		}
		conns = append(conns, conn)
	}
	after := int64(liveBytes())
	per := float64(after-before) / n
	t.Logf("%d inspected connections: %.1f MiB live in all (%.0f KiB each, clients and origin included)",
		n, float64(after-before)/(1<<20), per/1024)
	if float64(after-before) > 40<<20*raceFactor {
		t.Fatalf("%d inspected connections hold %d bytes, over 40 MiB", n, after-before)
	}
	runtime.KeepAlive(conns)
}
