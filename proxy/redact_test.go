package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// echoSecret is a secret with bytes that percent, JSON and HTML escaping each change.
const echoSecret = "s3cr3t/t0ken+with <json> & \"quotes\" 42"

// echoes returns texts an origin may echo echoSecret in.
func echoes(secret string) map[string]string {
	js, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + secret})
	out := map[string]string{
		"raw":           "Authorization: Bearer " + secret,
		"query":         "?auth=" + url.QueryEscape(secret),
		"path":          "/echo/" + url.PathEscape(secret),
		"lower hex":     "?auth=" + lowerHexEscapes(url.QueryEscape(secret)),
		"json":          string(js),
		"json slash":    strings.ReplaceAll(string(js), "/", `\/`),
		"base64 alone":  base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64 raw":    base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64url raw": base64.RawURLEncoding.EncodeToString([]byte(secret)),
	}
	for _, user := range []string{"", "u", "us", "use", "user"} { // every offset from a group
		out["basic "+user] = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+secret))
		out["base64url of header "+user] = base64.URLEncoding.EncodeToString([]byte("x-" + user + ": Bearer " + secret + "\n"))
	}
	return out
}

// leaks returns the forms of secret that text still holds enough of to read: the middle of
// any (a masked form may leave bytes of its surroundings at its ends unmasked).
func leaks(text, secret string) []string {
	var found []string
	for _, f := range secretForms(secret) {
		if f != secret && len(f) < minForm {
			continue
		}
		if mid := f[min(2, len(f)/4) : len(f)-min(2, len(f)/4)]; strings.Contains(text, mid) {
			found = append(found, f)
		}
	}
	return found
}

// TestRedactMasksEveryForm: each form an echo may take is masked whole, the text around it is
// untouched, and the length is kept.
func TestRedactMasksEveryForm(t *testing.T) {
	r := newRedactor([]string{echoSecret})
	for name, e := range echoes(echoSecret) {
		text := "before " + e + " after"
		got := r.string(text)
		if len(got) != len(text) || !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") || !strings.Contains(got, "****") {
			t.Errorf("%s: %q became %q", name, text, got)
		}
		if l := leaks(got, echoSecret); len(l) > 0 {
			t.Errorf("%s: %q still holds %q", name, got, l)
		}
	}
	if got := r.string("nothing secret here"); got != "nothing secret here" {
		t.Errorf("unrelated text became %q", got)
	}
}

// TestRedactReaderAnySplit: a body holding every echo, read in any two pieces or a byte at a
// time, comes out masked exactly as a whole read masks it.
func TestRedactReaderAnySplit(t *testing.T) {
	r := newRedactor([]string{echoSecret, "another-secret-value"})
	var body strings.Builder
	for _, e := range echoes(echoSecret) {
		body.WriteString(e + "\n")
	}
	body.WriteString("another-secret-valueanother-secret-value tail")
	want := r.string(body.String())
	read := func(src io.Reader) string {
		t.Helper()
		got, err := io.ReadAll(&redactReader{src: io.NopCloser(src), r: r})
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if got := read(iotest.OneByteReader(strings.NewReader(body.String()))); got != want {
		t.Fatalf("a byte at a time:\n%q\nwant\n%q", got, want)
	}
	text := body.String()
	for cut := 0; cut <= len(text); cut++ {
		if got := read(&twoPieces{a: text[:cut], b: text[cut:]}); got != want {
			t.Fatalf("cut at %d:\n%q\nwant\n%q", cut, got, want)
		}
	}
	if l := leaks(want, echoSecret); len(l) > 0 {
		t.Fatalf("the masked body holds %q", l)
	}
}

// twoPieces reads a, then b, then EOF: one read boundary, where a ends.
type twoPieces struct{ a, b string }

func (p *twoPieces) Read(b []byte) (int, error) {
	switch {
	case p.a != "":
		n := copy(b, p.a)
		p.a = p.a[n:]
		return n, nil
	case p.b != "":
		n := copy(b, p.b)
		p.b = p.b[n:]
		return n, nil
	}
	return 0, io.EOF
}

// TestRedactReaderHoldsBackOnError: a body cut by an error (not its end) never hands out the
// bytes it held back, which may start a secret.
func TestRedactReaderHoldsBackOnError(t *testing.T) {
	r := newRedactor([]string{echoSecret})
	src := io.MultiReader(strings.NewReader(strings.Repeat("x", 100)+echoSecret[:10]), iotest.ErrReader(io.ErrUnexpectedEOF))
	got, err := io.ReadAll(&redactReader{src: io.NopCloser(src), r: r})
	if err != io.ErrUnexpectedEOF || strings.Contains(string(got), echoSecret[:10]) {
		t.Fatalf("read %q (%v): want the error and nothing of the secret's start", got, err)
	}
}

// echoOrigin reflects each request's headers, as an echo endpoint does: in a response field,
// in a 103 Early Hints, in its body (raw, JSON, base64 of each line, percent-encoded) split
// across two writes in the middle of every secret, and in a trailer. /repos/acme/gzip answers
// compressed, whatever was asked.
func echoOrigin(split chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := strings.Join(r.Header.Values("Authorization"), ", ")
		if r.URL.Path == "/repos/acme/gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("X-Asked", r.Header.Get("Accept-Encoding"))
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, auth)
			_ = zw.Close()
			return
		}
		w.Header().Set("X-Echo-Authorization", auth)
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Trailer", "X-Echo-Trailer")
		js, _ := json.Marshal(r.Header)
		text := fmt.Sprintf("%s\n%s\n%s\n%s\n", auth, js, base64.StdEncoding.EncodeToString([]byte(auth)), url.QueryEscape(auth))
		// The first write ends in the middle of the first secret; the second waits until the
		// client has the head, so the proxy reads them apart.
		half := strings.Index(text, testSecret) + len(testSecret)/2
		_, _ = io.WriteString(w, text[:half])
		w.(http.Flusher).Flush()
		<-split
		_, _ = io.WriteString(w, text[half:])
		w.Header().Set("X-Echo-Trailer", auth)
	}
}

// TestInspectRedactsEchoedCredentials: an origin that echoes the request's headers hands the
// workload back no form of the secret the proxy swapped in (with a lower-case header name,
// two Authorization fields, a pipelined request), in headers, body or trailer, while the
// origin did get the secret; an origin that compresses anyway is answered 502.
func TestInspectRedactsEchoedCredentials(t *testing.T) {
	rt := startRecordingTarget(t)
	split := make(chan struct{}, 8)
	rt.serve(echoOrigin(split))
	hl := &headerLog{}
	rt.hook(func(auth, _ string) { hl.add(auth) })
	cred := egresslog.Credential{Host: inspectHost, Header: "Authorization", Placeholder: testPlaceholder, Secret: testSecret, Methods: []string{"GET"}}
	tp := startInspectingProxy(t, rt, acmeReadOnly, WithUpstreamRoots(rt.roots()), WithCredentials(cred))
	conn, err := connectTLS(t, tp, inspectHost)
	if err != nil {
		t.Fatal(err)
	}
	reqs := "GET /repos/acme/a HTTP/1.1\r\nHost: example.com\r\nauthorization: Bearer " + testPlaceholder + "\r\n\r\n" +
		"GET /repos/acme/b HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + testPlaceholder + "\r\nAuthorization: token " + testPlaceholder + "\r\n\r\n"
	if _, err := io.WriteString(conn, reqs); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	br := bufio.NewReader(io.TeeReader(conn, &got))
	for range 2 {
		for status := 0; status != http.StatusOK; {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("read: %v (so far %q)", err, got.String())
			}
			if status = resp.StatusCode; status == http.StatusOK {
				split <- struct{}{} // the head is here; now the rest of the body
				_, _ = io.Copy(io.Discard, resp.Body)
				got.WriteString(fmt.Sprintf("\ntrailer %v\n", resp.Trailer))
			}
			resp.Body.Close()
		}
	}
	if seen := hl.all(); len(seen) != 2 || !strings.Contains(seen[0], testSecret) || !strings.Contains(seen[1], testSecret) {
		t.Fatalf("the origin saw %q, want the secret swapped in", seen)
	}
	text := got.String()
	if l := leaks(text, testSecret); len(l) > 0 {
		t.Fatalf("the workload read forms of the secret %q in:\n%s", l, text)
	}
	if strings.Count(text, strings.Repeat("*", len(testSecret))) < 10 || !strings.Contains(text, "token "+strings.Repeat("*", len(testSecret))) {
		t.Fatalf("the echoes are not there, masked:\n%s", text)
	}
	if got := send(t, conn, get("/repos/acme/gzip"), 1); !strings.HasPrefix(got[0], "502") {
		t.Fatalf("a compressed answer: %q, want 502", got)
	}
	if seen := hl.all(); len(seen) != 3 {
		t.Fatalf("the origin saw %q", seen)
	}
	conn.Close()
	tp.Close()
	if log := tp.log.String(); !strings.Contains(log, "GET /repos/acme/gzip status=502") {
		t.Fatalf("decision log %q", log)
	}
}

// TestInspectAsksForIdentityUnderCredentials: a request to a host with credentials asks for
// an unencoded answer; one to a host without keeps what the workload asked.
func TestInspectAsksForIdentityUnderCredentials(t *testing.T) {
	for _, withCred := range []bool{true, false} {
		rt := startRecordingTarget(t)
		asked := make(chan string, 1)
		rt.serve(func(w http.ResponseWriter, r *http.Request) { asked <- r.Header.Get("Accept-Encoding") })
		opts := []Option{WithUpstreamRoots(rt.roots())}
		if withCred {
			opts = append(opts, WithCredentials(egresslog.Credential{Host: inspectHost, Header: "Authorization",
				Placeholder: testPlaceholder, Secret: testSecret, Methods: []string{"GET"}}))
		}
		tp := startInspectingProxy(t, rt, sandbox.EgressRule{Host: inspectHost, Methods: []string{"GET"}}, opts...)
		conn, err := connectTLS(t, tp, inspectHost)
		if err != nil {
			t.Fatal(err)
		}
		send(t, conn, "GET / HTTP/1.1\r\nHost: example.com\r\nAccept-Encoding: gzip, br\r\n\r\n", 1)
		want := "gzip, br"
		if withCred {
			want = "identity"
		}
		if got := <-asked; got != want {
			t.Errorf("with credentials %v: the origin was asked for %q, want %q", withCred, got, want)
		}
	}
}

// TestRedactFormsOfEightBytes: from 8 bytes on, every form of a secret is long enough to be
// masked, at every base64 offset (docs/operations.md states the bound).
func TestRedactFormsOfEightBytes(t *testing.T) {
	for _, s := range []string{"abcdefgh", `a"b/c<d>`, "12345678"} {
		r := newRedactor([]string{s})
		for _, f := range secretForms(s) {
			if !slices.ContainsFunc(r.forms, func(g []byte) bool { return string(g) == f }) {
				t.Errorf("secret %q: form %q is not masked", s, f)
			}
		}
	}
}

// BenchmarkRedactReader reads a 1 MiB body holding one echo of the secret through the
// redactor ("redacted") and as is ("plain"): what masking costs a response from a host with
// credentials, in bytes per second.
func BenchmarkRedactReader(b *testing.B) {
	body := []byte(strings.Repeat("{\"login\":\"octocat\",\"id\":1,\"url\":\"https://api.example/users/octocat\"}\n", 16000)[:1<<20-200] +
		"Authorization: Bearer " + testSecret)
	r := newRedactor([]string{testSecret})
	for _, redacted := range []bool{false, true} {
		name := "plain"
		if redacted {
			name = "redacted"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			buf := make([]byte, 32<<10)
			for b.Loop() {
				var src io.Reader = bytes.NewReader(body)
				if redacted {
					src = &redactReader{src: io.NopCloser(src), r: r}
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{src}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
