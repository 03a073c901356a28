package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/service"
)

// TestConsoleLameDuck: a console whose NATS user may not publish lame_duck shows the engine's
// lame-duck button greyed and answers 403 to the request the button would send, the engine
// still serving; the operator's console puts the engine in lame duck from the button: the
// engine's health says draining, the page shows it, and the sandbox it held still runs.
func TestConsoleLameDuck(t *testing.T) {
	p := startPool(t)
	id := p.engine.Service.EngineID()
	pinned := p.engine.Remote(t, client.WithEngine(id))
	sb := itest.AcquireRemote(t, pinned, p.engine.Backend, itest.NewKey(t), itest.BusyboxSpec(t))
	button := `#engines tbody tr[data-engine="` + id + `"] button.lame-duck`

	_, viewerURL := p.startConsole(t, viewerUser)
	tab := browser(t)
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(viewerURL), chromedp.WaitVisible(button, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("can-lame-duck").textContent === "denied"`, nil),
		chromedp.Poll(`document.querySelector('`+button+`').disabled === true`, nil)); err != nil {
		t.Fatalf("the viewer's page never showed the lame-duck button greyed: %v", err)
	}
	if code := pageAction(t, viewerURL, "api/lame_duck", `{"engine":"`+id+`"}`); code != http.StatusForbidden {
		t.Fatalf("the viewer's lame duck answered %d, want 403", code)
	}
	if h, err := pinned.Health(itest.Context(t)); err != nil || h.Status != service.HealthOK {
		t.Fatalf("after the viewer's refused lame duck the engine's health is %+v (%v), want ok", h, err)
	}

	_, opURL := p.startConsole(t, operatorUser)
	calls := `document.querySelector('#engines tbody tr[data-engine="` + id + `"]').cells[5].textContent`
	var before string
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(opURL), chromedp.WaitVisible(button, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("can-lame-duck").textContent === "allowed"`, nil),
		chromedp.Evaluate(`document.querySelector('`+button+`').dataset.mark = "kept"; `+calls, &before)); err != nil {
		t.Fatalf("the operator's page never offered the lame-duck button: %v", err)
	}
	// The engines table is polled; a poll that rebuilt the row would put a new button under
	// the user's pointer and lose the click. The call count moves, the button stays.
	itest.Sh(t, sb, "true")
	if err := within(t, tab, 30*time.Second,
		chromedp.Poll(calls+` !== "`+before+`"`, nil),
		chromedp.Poll(`document.querySelector('`+button+`').dataset.mark === "kept"`, nil, chromedp.WithPollingTimeout(time.Second))); err != nil {
		t.Fatalf("a poll of the engines replaced the lame-duck button (calls were %s): %v", before, err)
	}
	if err := within(t, tab, 30*time.Second,
		chromedp.Click(button, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("action-result").textContent.startsWith("engine `+id+` in lame duck")`, nil),
		chromedp.Poll(`document.querySelector('#engines tbody tr[data-engine="`+id+`"]').textContent.includes("draining")`, nil)); err != nil {
		t.Fatalf("the operator's lame-duck button did not put the engine in lame duck: %v", err)
	}
	if h, err := pinned.Health(itest.Context(t)); err != nil || h.Status != service.HealthDraining {
		t.Fatalf("after the button the engine's health is %+v (%v), want draining", h, err)
	}
	if out := itest.Sh(t, sb, "echo still"); !strings.Contains(out, "still") {
		t.Fatalf("the held sandbox in lame duck answered %q", out)
	}
}
