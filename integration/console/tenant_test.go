package console

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/console"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestConsoleAsATenant: a tenant's console (its own NATS account, --scope its scope) against an
// engine with tenancy, on a server with the accounts of docs/operations.md#tenancy. The page
// lists the engine and the tenant's sandbox, never the other tenant's; lame duck is greyed (the
// engine answers a tenant's probe forbidden) and the request its button would send is refused
// 403, the engine still ok; the tenant's dispose button disposes its own sandbox, and the other
// tenant's sandbox still runs.
func TestConsoleAsATenant(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	a, b, ops := "it-ca-"+hex.EncodeToString(suffix), "it-cb-"+hex.EncodeToString(suffix), "it-cops-"+hex.EncodeToString(suffix)
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b, ops)
	ctx := itest.Context(t)
	ev, err := events.New(ctx, natstest.ConnectAs(t, srv, "engine"), events.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("new events: %v", err)
	}
	t.Cleanup(func() { _ = ev.Close(ctx) })
	backend := itest.NewBackend(t)
	svc := itest.ServeObservedOn(t, natstest.ConnectAs(t, srv, "engine"), backend, ev,
		service.WithTenancy(&service.Tenancy{SameName: true, Operators: []string{ops}}))
	remote := func(acc string) *client.Backend {
		c, err := client.New(ctx, natstest.ConnectAs(t, srv, acc))
		if err != nil {
			t.Fatalf("new client as %s: %v", acc, err)
		}
		return c
	}
	spec := itest.BusyboxSpec(t)
	sbA := itest.AcquireRemote(t, remote(a), backend, sandbox.Key{Scope: a, ThreadID: "t", AgentID: "x"}, spec)
	sbB := itest.AcquireRemote(t, remote(b), backend, sandbox.Key{Scope: b, ThreadID: "t", AgentID: "x"}, spec)

	_, pageURL := serveConsole(t, natstest.ConnectAs(t, srv, a), console.WithScope(a), console.WithIdentity("NATS account "+a))
	tab := browser(t)
	id := svc.EngineID()
	rowA := `#sandboxes tr[data-instance="` + sbA.InstanceID() + `"]`
	button := `#engines tbody tr[data-engine="` + id + `"] button.lame-duck`
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(pageURL),
		chromedp.WaitVisible(button, chromedp.ByQuery), chromedp.WaitVisible(rowA, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("can-dispose").textContent === "allowed"`, nil),
		chromedp.Poll(`document.getElementById("can-lame-duck").textContent === "denied"`, nil),
		chromedp.Poll(`document.querySelector('`+button+`').disabled === true`, nil)); err != nil {
		var page string
		_ = within(t, tab, 5*time.Second, chromedp.Evaluate(`document.body.innerText`, &page))
		t.Fatalf("the tenant's page never listed the engine and its sandbox, dispose allowed and lame duck greyed: %v\n%s", err, page)
	}
	// The row of A's sandbox came from the same list_sandboxes call that would have named B's.
	var others int
	if err := within(t, tab, 10*time.Second, chromedp.Evaluate(
		`document.querySelectorAll('#sandboxes tr[data-instance="`+sbB.InstanceID()+`"]').length`, &others)); err != nil || others != 0 {
		t.Fatalf("the tenant's page lists the other tenant's sandbox (%d rows, %v)", others, err)
	}
	if code := pageAction(t, pageURL, "api/lame_duck", `{"engine":"`+id+`"}`); code != http.StatusForbidden {
		t.Fatalf("the tenant's lame duck answered %d, want 403", code)
	}
	if h, err := remote(ops).Health(ctx); err != nil || h.Status != service.HealthOK {
		t.Fatalf("after the tenant's refused lame duck the engine's health is %+v (%v), want ok", h, err)
	}

	if err := within(t, tab, 30*time.Second, chromedp.Click(rowA+` button.dispose`, chromedp.ByQuery),
		chromedp.WaitNotPresent(rowA, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("action-result").textContent.startsWith("disposed")`, nil)); err != nil {
		t.Fatalf("the tenant's dispose button did not dispose its sandbox: %v", err)
	}
	if out, err := exec.Command("docker", "inspect", "--format", "{{.Id}}", sbA.InstanceID()).CombinedOutput(); err == nil {
		t.Fatalf("the daemon still has the disposed instance: %s", out)
	}
	if out := itest.Sh(t, sbB, "echo still"); !strings.Contains(out, "still") {
		t.Fatalf("the other tenant's sandbox answered %q", out)
	}
}
