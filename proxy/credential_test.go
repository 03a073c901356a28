package proxy

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

const (
	testPlaceholder = "maf-placeholder-0123456789abcdef"
	testSecret      = "s3cr3t-token-the-workload-never-holds"
)

// headerLog records the Authorization header of every request the origin sees.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerLog) add(s string) { h.mu.Lock(); h.seen = append(h.seen, s); h.mu.Unlock() }
func (h *headerLog) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// TestInspectSwapsCredentials: the placeholder becomes the secret only on requests the rule
// passes and the credential's paths match, only in its header; a refused request reaches
// nothing, a request the credential does not match goes out with the placeholder as sent,
// and the decision log never holds the secret.
func TestInspectSwapsCredentials(t *testing.T) {
	rt := startRecordingTarget(t)
	hl := &headerLog{}
	rt.hook(func(auth, other string) { hl.add(auth + " | " + other) })
	cred := egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret,
		Methods: []string{"GET", "POST"}, Paths: []string{"/repos/acme/private/**"}}
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()), WithCredentials(cred))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	withAuth := func(method, path string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + testPlaceholder +
			"\r\nX-Other: " + testPlaceholder + "\r\n\r\n"
	}
	got := send(t, conn, withAuth("GET", "/repos/acme/private/x")+withAuth("GET", "/repos/acme/public")+withAuth("POST", "/repos/acme/private/x"), 3)
	if len(got) != 3 || !strings.HasPrefix(got[0], "200") || !strings.HasPrefix(got[1], "200") || !strings.HasPrefix(got[2], "403") {
		t.Fatalf("answers %q, want 200, 200, 403", got)
	}
	want := []string{"Bearer " + testSecret + " | " + testPlaceholder, "Bearer " + testPlaceholder + " | " + testPlaceholder}
	if seen := hl.all(); strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the origin saw %q, want %q", seen, want)
	}
	conn.Close()
	tp.Close()
	if strings.Contains(tp.log.String(), testSecret) {
		t.Fatalf("the decision log holds the secret: %q", tp.log.String())
	}
}

// TestInspectNoSwapInShadow: a request a shadow rule would refuse passes with the
// placeholder as sent.
func TestInspectNoSwapInShadow(t *testing.T) {
	rule := acmeReadOnly
	rule.Shadow = true
	rt := startRecordingTarget(t)
	hl := &headerLog{}
	rt.hook(func(auth, _ string) { hl.add(auth) })
	cred := egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret,
		Methods: []string{"GET", "POST"}}
	tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()), WithCredentials(cred))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	got := send(t, conn, "POST /admin HTTP/1.1\r\nHost: example.com\r\nAuthorization: "+testPlaceholder+"\r\n\r\n", 1)
	if !strings.HasPrefix(got[0], "200") {
		t.Fatalf("answer %q", got)
	}
	if seen := hl.all(); len(seen) != 1 || seen[0] != testPlaceholder {
		t.Fatalf("the origin saw %q, want the placeholder", seen)
	}
}

// TestCredentialsNeedTheirRule: a credential for a host no inspecting rule names, for a host
// pattern (the workload would pick the name it is sent to) or without a method list is a
// configuration error, never a credential silently dropped or sent anywhere.
func TestCredentialsNeedTheirRule(t *testing.T) {
	get := []string{"GET"}
	cred := egresslog.Credential{Host: "other.example", Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret, Methods: get}
	wildRule := sandbox.EgressRule{Host: "api-*.example", Methods: get}
	wild := egresslog.Credential{Host: wildRule.Host, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret, Methods: get}
	noMethods := egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret}
	for _, opts := range [][]Option{{WithCredentials(cred)}, {WithInspect(acmeReadOnly), WithCredentials(cred)},
		{WithInspect(wildRule), WithCredentials(wild)}, {WithInspect(acmeReadOnly), WithCredentials(noMethods)}} {
		if _, err := New([]string{inspectHost, "other.example", wildRule.Host}, opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New = %v, want ErrInvalidConfig", err)
		}
	}
}

// TestInspectNeverSwapsIntoTrace: TRACE and TRACK echo the request back, so the proxy sends
// them with the placeholder as the workload sent it, even for a credential (built past the
// grammar, which refuses it) that lists them.
func TestInspectNeverSwapsIntoTrace(t *testing.T) {
	rule := sandbox.EgressRule{Host: inspectHost, Methods: []string{"GET", "TRACE", "TRACK"}, Paths: []string{"/**"}}
	rt := startRecordingTarget(t)
	hl := &headerLog{}
	rt.hook(func(auth, _ string) { hl.add(auth) })
	cred := egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret,
		Methods: []string{"GET", "TRACE", "TRACK"}}
	tp := startInspectingProxy(t, rt, rule, WithUpstreamRoots(rt.roots()), WithCredentials(cred))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	req := func(method string) string {
		return method + " /x HTTP/1.1\r\nHost: example.com\r\nAuthorization: " + testPlaceholder + "\r\n\r\n"
	}
	if got := send(t, conn, req("TRACE")+req("TRACK")+req("GET"), 3); len(got) != 3 || !strings.HasPrefix(got[2], "200") {
		t.Fatalf("answers %q", got)
	}
	if seen := hl.all(); strings.Join(seen, " ") != testPlaceholder+" "+testPlaceholder+" "+testSecret {
		t.Fatalf("the origin saw %q, want the placeholder on TRACE and TRACK, the secret on GET", seen)
	}
}
