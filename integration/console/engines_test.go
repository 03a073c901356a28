package console

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
)

// TestConsoleTwoEngines: a pool of two engines on one NATS server holds sandboxes acquired
// before the console starts; the page lists both engines, and every sandbox on the row of the
// engine that holds it — the inventory from list_sandboxes, since no audit event of those
// acquires reached the console.
func TestConsoleTwoEngines(t *testing.T) {
	p := startPool(t)
	second, _ := itest.ServeBackend(t, p.srv, itest.NewBackend(t))
	remote := p.engine.Remote(t)
	spec := itest.BusyboxSpec(t)
	held := map[string]string{} // instance → engine
	for range 6 {
		sb := itest.AcquireRemote(t, remote, p.engine.Backend, itest.NewKey(t), spec)
		held[sb.InstanceID()] = sb.(*client.Sandbox).Engine()
	}
	engines := map[string]bool{}
	for _, e := range held {
		engines[e] = true
	}
	t.Logf("the pool spread 6 sandboxes over %d engines", len(engines))

	_, pageURL := p.startConsole(t, operatorUser)
	tab := browser(t)
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(pageURL),
		chromedp.WaitVisible(`#engines tbody tr[data-engine="`+p.engine.Service.EngineID()+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#engines tbody tr[data-engine="`+second.EngineID()+`"]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never listed both engines: %v", err)
	}
	for instance, engine := range held {
		row := `#sandboxes tr[data-instance="` + instance + `"]`
		var text string
		if err := within(t, tab, 10*time.Second, chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Text(row, &text, chromedp.ByQuery)); err != nil {
			t.Fatalf("the page never listed %s, held by %s: %v", instance[:12], engine, err)
		}
		if !strings.Contains(text, engine) {
			t.Fatalf("the row of %s says %q, want its engine %s", instance[:12], text, engine)
		}
	}
}
