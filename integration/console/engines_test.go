package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
)

// TestConsoleTwoEngines: a pool of two engines on one NATS server holds sandboxes acquired
// before the console starts; the page lists both engines, and every sandbox on the row of the
// engine that holds it — the inventory from list_sandboxes, since no audit event of those
// acquires reached the console.
func TestConsoleTwoEngines(t *testing.T) {
	p := startPool(t)
	ev, err := events.New(itest.Context(t), natstest.Connect(t, p.srv), events.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("new events: %v", err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	second, _ := itest.ServeObserved(t, p.srv, itest.NewBackend(t), ev)
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

	// The second engine stops: its stop is an engine event on the page, its row goes, and
	// so do the sandboxes it held (it holds nothing any more; the daemon keeps them).
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := second.Stop(stopCtx); err != nil {
		t.Fatalf("stop the second engine: %v", err)
	}
	id := second.EngineID()
	if err := within(t, tab, 10*time.Second,
		chromedp.WaitVisible(`#engine-events tr[data-type="engine.stopped"][data-engine="`+id+`"]`, chromedp.ByQuery),
		chromedp.WaitNotPresent(`#engines tbody tr[data-engine="`+id+`"]`, chromedp.ByQuery),
		chromedp.Poll(`![...document.querySelectorAll("#sandboxes tbody tr")].some(r => r.textContent.includes("`+id+`"))`, nil)); err != nil {
		t.Fatalf("the page did not follow the second engine's stop: %v", err)
	}
}
