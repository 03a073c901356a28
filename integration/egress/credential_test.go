package egress

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// Credentials at the boundary on the real engine: the workload
// holds a placeholder in the variable its spec names; the allowed GET that carries it reaches
// the target with the real secret (the target logs the header's digest, never its value); the
// same placeholder sent to another inspected host, and on a request the credential's rule
// refuses, is never swapped; and the secret is found nowhere the workload or its owner can
// look: its environment and every process's, its whole filesystem (docker export), `docker
// inspect` of the workload, the target's echo of every other header, and the drained window.
func TestEgressCredentialSwappedAtTheBoundary(t *testing.T) {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secret := "tok-" + hex.EncodeToString(raw)
	w := acquireInspected(t,
		sandbox.EgressRule{Host: allowedHost, Methods: []string{"GET"}, Paths: []string{"/allowed/**"},
			Credentials: []sandbox.EgressCredential{{Header: "Authorization", Env: "TARGET_TOKEN", Secret: sandbox.Secret(secret)}}},
		sandbox.EgressRule{Host: deniedHost, Paths: []string{"/**"}}, // inspected too, without the credential
	)
	fx, b, sink, key, n := w.fx, w.b, w.sink, w.key, w.name
	ctx := itest.Context(t)
	run := func(line string) string { t.Helper(); return w.run(t, "sh", "-c", line) }
	placeholder := run(`printf %s "$TARGET_TOKEN"`)
	if len(placeholder) < 24 || strings.Contains(placeholder, secret) {
		t.Fatalf("the workload's variable holds %q, want a placeholder", placeholder)
	}
	digest := func(v string) string { s := sha256.Sum256([]byte(v)); return hex.EncodeToString(s[:]) }
	var echoes []string
	send := func(method, host, path string) string {
		t.Helper()
		out := run(fmt.Sprintf(`maf-e2e send %s https://%s%s "Authorization: Bearer $TARGET_TOKEN" "X-Echo: $TARGET_TOKEN"`, method, host, path))
		echoes = append(echoes, out)
		code, _, _ := strings.Cut(out, "\n")
		return code
	}
	if code := send("GET", allowedHost, "/allowed/x"); code != "code=200" {
		t.Fatalf("allowed GET: %s", code)
	}
	if code := send("POST", allowedHost, "/allowed/x"); code != "code=403" {
		t.Fatalf("refused POST: %s", code)
	}
	if code := send("GET", deniedHost, "/elsewhere"); code != "code=200" {
		t.Fatalf("GET to the other inspected host: %s", code)
	}
	targetLines := func(host string) []string {
		var seen []string
		for _, line := range strings.Split(dockertest.Docker(t, "logs", fx.ids[host]), "\n") {
			if strings.HasPrefix(line, "request ") {
				seen = append(seen, line)
			}
		}
		return seen
	}
	if got, want := targetLines(allowedHost), "request GET /allowed/x auth-sha256="+digest("Bearer "+secret); len(got) != 1 || got[0] != want {
		t.Fatalf("the credential's host saw %q, want only the GET with the real secret (%s)", got, want)
	}
	if got, want := targetLines(deniedHost), "request GET /elsewhere auth-sha256="+digest("Bearer "+placeholder); len(got) != 1 || got[0] != want {
		t.Fatalf("the other host saw %q, want the placeholder unswapped (%s)", got, want)
	}
	// The echo of every header but Authorization: the X-Echo header carried the placeholder,
	// never swapped (only the credential's own header is).
	if all := strings.Join(echoes, "\n"); strings.Contains(all, secret) || !strings.Contains(all, "X-Echo: "+placeholder) {
		t.Fatalf("the responses the workload read: %q", all)
	}
	// An endpoint that echoes every request header, Authorization included, in several
	// encodings and across a read boundary: what the workload reads back, as root, as uid 1000,
	// and over one connection with a lower-case field name, two Authorization fields and a
	// pipelined request, holds the secret in no form, and the echo is there, masked.
	echo := "https://" + allowedHost + "/allowed/echo?e2e=echo"
	sendEcho := `maf-e2e send GET ` + echo + ` "Authorization: Bearer $TARGET_TOKEN"`
	echoed := map[string]string{
		"as root":     run(sendEcho),
		"as uid 1000": strings.TrimSpace(dockertest.Docker(t, "exec", "-u", "1000", n, "sh", "-c", sendEcho)),
	}
	pipelined := "GET /allowed/echo?e2e=echo HTTP/1.1\r\nHost: " + allowedHost + "\r\nauthorization: Bearer " + placeholder + "\r\n\r\n" +
		"GET /allowed/echo?e2e=echo HTTP/1.1\r\nHost: " + allowedHost + "\r\nAuthorization: Bearer " + placeholder +
		"\r\nAuthorization: token " + placeholder + "\r\nConnection: close\r\n\r\n"
	echoed["pipelined, lower-case, two fields"] = w.run(t, "maf-e2e", "rawall", allowedHost, allowedHost, "http/1.1",
		base64.StdEncoding.EncodeToString([]byte(pipelined)))
	masked := strings.Repeat("*", len(secret))
	for how, out := range echoed {
		if where := revealed(out, secret); where != "" {
			t.Errorf("%s: the workload read the secret (%s) in %q", how, where, out)
		}
		if !strings.HasPrefix(out, "code=200") && !strings.HasPrefix(out, "alpn=http/1.1\nHTTP/1.1 200") || !strings.Contains(out, "Authorization: Bearer "+masked) {
			t.Errorf("%s: %q: want the echo, masked", how, out)
		}
	}
	if out := echoed["pipelined, lower-case, two fields"]; strings.Count(out, "HTTP/1.1 200") != 2 ||
		!strings.Contains(out, "X-Echo-Authorization: Bearer "+masked) || !strings.Contains(out, "X-Echo-Authorization: token "+masked) {
		t.Errorf("the pipelined echoes: %q", out)
	}
	// Everywhere the workload, or its owner through Docker, can look.
	places := map[string]string{
		"environment":             run(`env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'`),
		"filesystem":              dockertest.Docker(t, "export", n),
		"docker inspect workload": dockertest.Docker(t, "inspect", n),
	}
	for where, text := range places {
		if strings.Contains(text, secret) {
			t.Errorf("the secret is in the workload's %s", where)
		}
	}
	if !strings.Contains(places["environment"], "TARGET_TOKEN="+placeholder) {
		t.Errorf("the workload's environment lacks the placeholder")
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	ws := sink.got()
	if len(ws) != 1 || strings.Contains(fmt.Sprintf("%+v", ws[0]), secret) {
		t.Fatalf("windows %+v: want one, without the secret", ws)
	}
	// A credential on a host pattern would go to whatever name the workload picks: a spec
	// changed after NewSpec to hold one is refused at acquire, before anything is made.
	wild := w.spec
	wild.EgressAllow = []sandbox.EgressRule{{Host: "*.maf-e2e.example", Methods: []string{"GET"},
		Credentials: []sandbox.EgressCredential{{Header: "Authorization", Env: "TARGET_TOKEN", Secret: sandbox.Secret(secret)}}}}
	wildKey := itest.NewKey(t)
	_, err := b.Acquire(ctx, wildKey, wild)
	if err == nil {
		t.Cleanup(func() { _ = b.Dispose(ctx, wildKey, sandbox.DisposeOptions{}) })
	}
	if !errors.As(err, new(*sandbox.InvalidArgumentError)) {
		t.Fatalf("acquire with a credential on a host pattern: %v, want an *InvalidArgumentError", err)
	}
	wildName := docker.ContainerName(wildKey, wild.Kind, docker.EgressID(images.ProxyTag, sandbox.EgressIdentities(wild.EgressAllow)))
	if left := leftovers(t, wildName); left != "" {
		t.Fatalf("a refused acquire left %s", left)
	}
	if err := b.AwaitTeardowns(ctx); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
}

// revealed says in which form out holds secret: as is, or once a line or a word of it is
// decoded from base64 (either alphabet) or percent-encoding; "" when in none.
func revealed(out, secret string) string {
	if strings.Contains(out, secret) {
		return "as is"
	}
	for _, line := range strings.Split(out, "\n") {
		for _, word := range append(strings.Fields(line), line) {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
				if b, err := enc.DecodeString(word); err == nil && strings.Contains(string(b), secret) {
					return "base64"
				}
			}
			if u, err := url.QueryUnescape(word); err == nil && strings.Contains(u, secret) {
				return "percent-encoded"
			}
		}
	}
	return ""
}
