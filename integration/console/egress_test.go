package console

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// consoleSubnets is where the test's internal outbound networks take a /24 from.
const consoleSubnets = "10.219.0.0/16"

// outboundNetwork creates an internal network for the proxies' outbound leg: nothing is
// reachable through it, and nothing needs to be, since the request the test makes is denied
// by the proxy before any dial.
func outboundNetwork(t *testing.T) (string, netip.Prefix) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "maf-console-out-" + hex.EncodeToString(b)
	dockertest.CleanupNetwork(t, name)
	pool, err := docker.NewSubnetPool(netip.MustParsePrefix(consoleSubnets), 24)
	if err != nil {
		t.Fatal(err)
	}
	for subnet := range pool.Candidates(name) {
		args := append([]string{"network", "create", "--internal", "--subnet", subnet.String()}, dockertest.LabelArgs()...)
		_, stderr, err := dockertest.DockerErr(itest.Context(t), append(args, name)...)
		if err == nil {
			return name, subnet
		}
		if !strings.Contains(string(stderr), "overlaps") {
			t.Fatalf("create the outbound network: %v: %s", err, stderr)
		}
	}
	t.Fatalf("no free /24 in %s for the outbound network", consoleSubnets)
	return "", netip.Prefix{}
}

// TestConsoleShowsDeniedEgress: an allowlisted sandbox asks its proxy for a host off its
// allowlist; once the sandbox is disposed its proxy's window is published, and the page
// shows the denial first in the egress view, with its scope and host, within 2 s of the
// dispose's answer; the scope filter keeps it, another scope's hides it.
func TestConsoleShowsDeniedEgress(t *testing.T) {
	dockertest.Require(t)
	ctx := itest.Context(t)
	for _, err := range []error{images.EnsureProxy(ctx, "docker", images.ProxyTag), images.EnsureClient(ctx, "docker", dockertest.Busybox(t))} {
		if err != nil {
			t.Fatalf("build images: %v", err)
		}
	}
	network, subnet := outboundNetwork(t)
	p := startPoolWith(t, &docker.Config{EgressProxyImage: images.ProxyTag, OutboundNetwork: network,
		EgressPrivateCIDRs: []netip.Prefix{subnet}})
	_, pageURL := p.startConsole(t, operatorUser)
	tab := browser(t)
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(pageURL), chromedp.WaitVisible(`#engines tbody tr`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never showed the engine: %v", err)
	}
	remote := p.engine.Remote(t)
	key := itest.NewKey(t)
	spec, err := sandbox.NewSpec("fetcher", sandbox.WithImage(images.ClientTag), sandbox.WithAllowlist(sandbox.EgressRule{Host: "allowed.example"}))
	if err != nil {
		t.Fatal(err)
	}
	sb := itest.AcquireRemote(t, remote, p.engine.Backend, key, spec)
	res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://denied.example/", ""), "/", time.Minute)
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("the denied request: exit %d, %q (%v)", res.ExitCode, res.Stdout(), err)
	}
	if f := remote.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	disposed := time.Now()
	denial := `[...document.querySelectorAll("#egress tbody tr")].findIndex(r => r.textContent.includes("denied.example") && r.textContent.includes("` + key.Scope + `")) === 0 &&
		document.querySelector("#egress tbody tr").textContent.startsWith("DENY")`
	if err := within(t, tab, 2*time.Second, chromedp.Poll(denial, nil)); err != nil {
		t.Fatalf("the page did not show the denial first within 2 s of the dispose: %v", err)
	}
	t.Logf("denial shown %s after the dispose answered", time.Since(disposed).Round(time.Millisecond))
	perScope := `Number(document.querySelector('#denials li[data-scope="` + key.Scope + `"]')?.dataset.count) >= 1`
	if err := within(t, tab, 2*time.Second, chromedp.Poll(perScope, nil)); err != nil {
		t.Fatalf("the denials per scope never counted the scope's denial: %v", err)
	}
	filter := func(scope string) chromedp.Action {
		var ok bool
		return chromedp.Evaluate(`(() => { const i = document.getElementById("f-scope"); i.value = "`+scope+`";
			i.dispatchEvent(new Event("input")); return true })()`, &ok)
	}
	if err := within(t, tab, 5*time.Second, filter("no-such-scope"),
		chromedp.Poll(`document.querySelectorAll("#egress tbody tr").length === 0`, nil),
		filter(key.Scope), chromedp.Poll(denial, nil)); err != nil {
		t.Fatalf("the scope filter: %v", err)
	}
}
