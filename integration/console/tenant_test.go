package console

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

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

// TestConsoleOfATenantWithoutScope: a tenant's console started without --scope finds its own
// scope's sandboxes (the engine answers a tenant's list naming no scope with its own scopes
// alone) and never the other tenant's; a long key wraps inside its cell, the sandboxes table
// staying within its panel. A console given a scope that is not the tenant's says on the page
// why nothing is listed and what to change, and neither asks again nor logs the refusal at
// every poll.
func TestConsoleOfATenantWithoutScope(t *testing.T) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	a, b, ops := "it-ca-"+hex.EncodeToString(suffix), "it-cb-"+hex.EncodeToString(suffix), "it-cops-"+hex.EncodeToString(suffix)
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b, ops)
	backend := itest.NewBackend(t)
	itest.ServeBackendOn(t, natstest.ConnectAs(t, srv, "engine"), backend,
		service.WithTenancy(&service.Tenancy{SameName: true, Operators: []string{ops}}))
	ctx := itest.Context(t)
	remote := func(acc string) *client.Backend {
		c, err := client.New(ctx, natstest.ConnectAs(t, srv, acc))
		if err != nil {
			t.Fatalf("new client as %s: %v", acc, err)
		}
		return c
	}
	spec := itest.BusyboxSpec(t)
	long := strings.Repeat("a-very-long-thread-name-", 10)
	sbA := itest.AcquireRemote(t, remote(a), backend, sandbox.Key{Scope: a, ThreadID: long, AgentID: long}, spec)
	sbB := itest.AcquireRemote(t, remote(b), backend, sandbox.Key{Scope: b, ThreadID: "t", AgentID: "x"}, spec)

	t.Run("a scope that is not the tenant's", func(t *testing.T) {
		// What the console asks the engine, seen from the engine's account.
		var health, lists atomic.Int64
		watch := natstest.ConnectAs(t, srv, "engine")
		for subject, n := range map[string]*atomic.Int64{"maf.sandbox.api.v1.engine.*.health": &health, "maf.sandbox.api.v1.engine.*.list_sandboxes": &lists} {
			if _, err := watch.Subscribe(subject, func(*nats.Msg) { n.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := watch.Flush(); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		// Polls a second apart, each waiting up to half a second for the engines' statistics:
		// a loaded machine that answered them late would make the console forget the engine
		// and list it again when it reappears.
		c, pageURL := serveConsole(t, natstest.ConnectAs(t, srv, a), console.WithScope(b), console.WithLogger(zap.New(core)),
			console.WithPoll(time.Second, time.Minute))
		tab := browser(t)
		if err := within(t, tab, 30*time.Second, chromedp.Navigate(pageURL),
			chromedp.WaitVisible(`#notice`, chromedp.ByQuery)); err != nil {
			t.Fatalf("the page never said why nothing is listed: %v", err)
		}
		var notice string
		if err := within(t, tab, 5*time.Second, chromedp.Text(`#notice`, &notice, chromedp.ByQuery)); err != nil ||
			!strings.Contains(notice, "--scope \""+b+"\"") || !strings.Contains(notice, "may not") {
			t.Fatalf("the notice says %q (%v): want the engine's reason and the --scope to change", notice, err)
		}
		// Five more polls of the engine's health: the refused list was not asked again (the
		// next try waits for the reconcile, a minute here) nor logged again.
		seen := health.Load()
		for deadline := time.Now().Add(30 * time.Second); health.Load() < seen+5; {
			if time.Now().After(deadline) {
				t.Fatalf("the console polled the engine's health %d times in 30 s", health.Load()-seen)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if n, logged := lists.Load(), logs.FilterMessage("the engine refuses to list sandboxes to this console").Len(); n != 1 || logged != 1 {
			t.Fatalf("over five polls the refused list was asked %d times and logged %d times, want once each", n, logged)
		}
		if got := len(c.Sandboxes()); got != 0 {
			t.Fatalf("the console lists %d sandboxes of a scope it may not see", got)
		}
	})

	_, pageURL := serveConsole(t, natstest.ConnectAs(t, srv, a), console.WithIdentity("NATS account "+a))
	tab := browser(t)
	rowA := `#sandboxes tr[data-instance="` + sbA.InstanceID() + `"]`
	if err := within(t, tab, 30*time.Second, chromedp.EmulateViewport(1024, 768), chromedp.Navigate(pageURL),
		chromedp.WaitVisible(rowA, chromedp.ByQuery)); err != nil {
		var page string
		_ = within(t, tab, 5*time.Second, chromedp.Evaluate(`document.body.innerText`, &page))
		t.Fatalf("the tenant's console without --scope never listed its own sandbox: %v\n%s", err, page)
	}
	var others int
	var noticeHidden bool
	if err := within(t, tab, 10*time.Second, chromedp.Evaluate(
		`document.querySelectorAll('#sandboxes tr[data-instance="`+sbB.InstanceID()+`"]').length`, &others),
		chromedp.Evaluate(`document.getElementById("notice").hidden`, &noticeHidden)); err != nil || others != 0 || !noticeHidden {
		t.Fatalf("the tenant's page lists %d of the other tenant's sandboxes, notice hidden %v (%v)", others, noticeHidden, err)
	}
	var fit struct {
		Table float64 `json:"table"`
		Panel float64 `json:"panel"`
		Title string  `json:"title"`
	}
	if err := within(t, tab, 10*time.Second, chromedp.Evaluate(`(() => {
		const table = document.getElementById("sandboxes");
		return {table: table.getBoundingClientRect().right, panel: table.closest("section").getBoundingClientRect().right,
			title: document.querySelector('`+rowA+`').cells[1].title};
	})()`, &fit)); err != nil || fit.Table > fit.Panel+0.5 || fit.Title != long {
		t.Fatalf("the sandboxes table ends at %.0f px, its panel at %.0f px, the thread cell's title %q (%v): want the table within the panel and the whole key in the title",
			fit.Table, fit.Panel, fit.Title, err)
	}
}
