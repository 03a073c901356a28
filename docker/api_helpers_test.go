package docker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newFakeAPI writes the fake client of binding_helpers_test.go and returns an engine binding
// through it. env entries (K=V) are set in the process environment before construction, so
// they land in the engine's snapshot.
func newFakeAPI(t *testing.T, env ...string) (*Engine, string) {
	t.Helper()
	cfg, logPath := fakeClient(t, env...)
	a, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, logPath
}

// fakeDaemon answers the two calls ServerOS makes (ping, version) as a 20.10 engine would, and
// counts the requests it served.
type fakeDaemon struct {
	requests atomic.Int64
	// handle, when set, answers a request first; it reports whether it did.
	handle func(w http.ResponseWriter, r *http.Request) bool
}

func (d *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.requests.Add(1)
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Ostype", "linux")
	if d.handle != nil && d.handle(w, r) {
		return
	}
	switch {
	case r.URL.Path == "/_ping":
		_, _ = w.Write([]byte("OK"))
	case strings.HasSuffix(r.URL.Path, "/version"):
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"Os": "linux", "ApiVersion": "1.41", "MinAPIVersion": "1.12"})
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": "page not found"})
	}
}

// unixDaemon serves a fakeDaemon on a socket under a fresh temporary directory and returns its
// endpoint.
func unixDaemon(t *testing.T) (*fakeDaemon, string) {
	t.Helper()
	return daemonAt(t, "d.sock")
}

// tlsDaemon serves a fakeDaemon over TLS on 127.0.0.1, requiring a client certificate signed by
// the returned CA, and writes ca.pem, cert.pem and key.pem (a client pair the daemon accepts)
// into dir.
func tlsDaemon(t *testing.T, dir string) (*fakeDaemon, string) {
	t.Helper()
	d := &fakeDaemon{}
	srv := httptest.NewUnstartedServer(d)
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	caKeyDER, _ := x509.MarshalECPrivateKey(caKey)
	serverPair, err := tls.X509KeyPair(pemBlock("CERTIFICATE", caDER), pemBlock("EC PRIVATE KEY", caKeyDER))
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	clientKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	clientTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKeyDER, _ := x509.MarshalECPrivateKey(clientKey)
	for name, data := range map[string][]byte{
		"ca.pem":   pemBlock("CERTIFICATE", caDER),
		"cert.pem": pemBlock("CERTIFICATE", clientDER),
		"key.pem":  pemBlock("EC PRIVATE KEY", clientKeyDER),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d, "tcp://" + srv.Listener.Addr().String()
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// contextJSON is a `context inspect --format {{json .}}` answer for a named context whose
// store lives under storeDir (meta/ and tls/docker/ in it).
func contextJSON(t *testing.T, name, host, storeDir string, tlsFiles ...string) string {
	t.Helper()
	doc := map[string]any{
		"Name":        name,
		"Metadata":    map[string]any{},
		"Endpoints":   map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": false}},
		"TLSMaterial": map[string]any{},
		"Storage":     map[string]any{"MetadataPath": filepath.Join(storeDir, "meta"), "TLSPath": filepath.Join(storeDir, "tls")},
	}
	if len(tlsFiles) > 0 {
		doc["TLSMaterial"] = map[string]any{"docker": tlsFiles}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeMeta(t, storeDir, name, host)
	return string(b)
}

// writeMeta writes the context's meta.json as the client stores it.
func writeMeta(t *testing.T, storeDir, name, host string) {
	t.Helper()
	meta := map[string]any{"Name": name, "Metadata": map[string]any{},
		"Endpoints": map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": false}}}
	b, _ := json.Marshal(meta)
	if err := os.MkdirAll(filepath.Join(storeDir, "meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(storeDir, "meta", "meta.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
