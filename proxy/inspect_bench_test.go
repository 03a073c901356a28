package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/egresslog"
)

// BenchmarkRequestThroughProxy is one GET and its response on a kept-alive connection through
// the proxy on loopback, to the same HTTPS origin: "tunnel" with the client's TLS end to end,
// "inspected" with the proxy terminating TLS, deciding the request and re-encrypting it.
// Their difference is what inspection adds to a request (the target: under 2 ms at the
// median). "inspected, credentials" adds a credential to the rule: the placeholder swapped in,
// and the response read through the redactor.
func BenchmarkRequestThroughProxy(b *testing.B) {
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	origin.Config.ErrorLog = log.New(io.Discard, "", 0)
	origin.StartTLS()
	defer origin.Close()
	roots := x509.NewCertPool()
	roots.AddCert(origin.Certificate())
	cred := WithCredentials(egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder,
		Secret: testSecret, Methods: []string{"GET"}})
	for _, c := range []struct {
		name      string
		inspected bool
		opts      []Option
	}{{"tunnel", false, nil}, {"inspected", true, nil}, {"inspected, credentials", true, []Option{cred}}} {
		b.Run(c.name, func(b *testing.B) { benchRequest(b, origin, roots, c.inspected, c.opts...) })
	}
}

func benchRequest(b *testing.B, origin *httptest.Server, roots *x509.CertPool, inspected bool, extra ...Option) {
	res := &stubResolver{answers: map[string][]netip.Addr{inspectHost: addrs("127.0.0.1")}}
	opts := []Option{WithDecisionLog(io.Discard), WithResolver(res), withAdmitLoopback(),
		withDialPort(origin.Listener.Addr().(*net.TCPAddr).Port), WithUpstreamRoots(roots)}
	if inspected {
		opts = append(opts, WithInspect(acmeReadOnly))
	}
	opts = append(opts, extra...)
	p, err := New([]string{inspectHost}, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	defer func() { p.Close(); <-served }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "CONNECT "+inspectHost+":443 HTTP/1.1\r\n\r\n"); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(established))); err != nil {
		b.Fatal(err)
	}
	trust := roots
	if inspected {
		trust = x509.NewCertPool()
		trust.AppendCertsFromPEM(p.CACertificatePEM())
	}
	tc := tls.Client(c, &tls.Config{ServerName: inspectHost, RootCAs: trust})
	br := bufio.NewReader(tc)
	req := "GET /repos/acme/a HTTP/1.1\r\nHost: " + inspectHost + "\r\nAuthorization: Bearer " + testPlaceholder + "\r\n\r\n"
	b.ResetTimer()
	for b.Loop() {
		if _, err := io.WriteString(tc, req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "ok") {
			b.Fatalf("answer %s %q", resp.Status, body)
		}
	}
}
