package console

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// TestConsolePauseAndSnapshot drives the console's page in headless chromium: the operator
// pauses a listed sandbox from its row (the daemon says paused, the row says so), takes a
// snapshot of it from the row (the row counts it, the opened sandbox lists it), and both
// acts are on the audit stream with the reason operator.
func TestConsolePauseAndSnapshot(t *testing.T) {
	p := startPool(t)
	_, pageURL := p.startConsole(t, operatorUser)
	ctx := browser(t)
	if err := within(t, ctx, 30*time.Second, chromedp.Navigate(pageURL), chromedp.WaitVisible(`#engines tbody tr`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never showed an engine: %v", err)
	}
	remote := p.engine.Remote(t)
	sb := itest.AcquireRemote(t, remote, p.engine.Backend, itest.NewKey(t), itest.BusyboxSpec(t))
	row := `#sandboxes tr[data-instance="` + sb.InstanceID() + `"]`
	cellIs := func(i int, want string) string {
		return fmt.Sprintf(`(() => { const r = document.querySelector('%s'); return r && r.cells[%d].textContent === %q; })()`, row, i, want)
	}
	if err := within(t, ctx, 10*time.Second, chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Poll(cellIs(10, "live"), nil)); err != nil {
		t.Fatalf("the sandbox was not listed live: %v", err)
	}
	if err := within(t, ctx, 30*time.Second, chromedp.Click(row+` button.pause`, chromedp.ByQuery),
		chromedp.Poll(cellIs(10, "paused"), nil)); err != nil {
		t.Fatalf("the row never said paused after the pause button: %v", err)
	}
	if st := dockertest.Docker(t, "inspect", "-f", "{{.State.Status}}", sb.InstanceID()); st != "paused" {
		t.Fatalf("the daemon says %q after the console's pause", st)
	}
	// The count comes with the snapshot.taken event, which the page may hear before the
	// action's own reply: the reply's line is waited for in its own right.
	var result string
	replied := `(() => { const t = document.getElementById("action-result").textContent; return t.startsWith("snapshot ") || t.startsWith("refused"); })()`
	if err := within(t, ctx, 60*time.Second, chromedp.Click(row+` button.snapshot`, chromedp.ByQuery),
		chromedp.Poll(cellIs(11, "1"), nil), chromedp.Poll(replied, nil), chromedp.Text(`#action-result`, &result, chromedp.ByQuery)); err != nil {
		t.Fatalf("the row never counted the snapshot taken from its button: %v", err)
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(result, "snapshot "), " ")
	if len(id) != 32 {
		t.Fatalf("the page said %q after the snapshot button", result)
	}
	if err := within(t, ctx, 10*time.Second, chromedp.Click(row+` td`, chromedp.ByQuery),
		chromedp.Poll(`[...document.querySelectorAll("#snapshots-of li")].some(l => l.textContent.startsWith("`+id+`"))`, nil)); err != nil {
		t.Fatalf("the opened sandbox did not list snapshot %s: %v", id, err)
	}
	if st := dockertest.Docker(t, "inspect", "-f", "{{.State.Status}}", sb.InstanceID()); st != "paused" {
		t.Fatalf("a snapshot of a paused sandbox left it %q; it reads it asleep", st)
	}
	var audit []events.AuditEvent
	if err := within(t, ctx, 10*time.Second, chromedp.Poll(`[...document.querySelectorAll("#audit tbody tr")].some(r => r.textContent.includes("snapshot.taken"))`, nil)); err != nil {
		t.Fatalf("the opened sandbox's audit never showed the snapshot: %v", err)
	}
	var raw string
	if err := within(t, ctx, 5*time.Second, chromedp.Evaluate(`JSON.stringify(st.audit)`, &raw)); err != nil || json.Unmarshal([]byte(raw), &audit) != nil {
		t.Fatalf("read the page's audit: %v", err)
	}
	reasons := map[string]string{}
	for _, e := range audit {
		if e.Lifecycle != nil && e.InstanceID == sb.InstanceID() {
			reasons[e.Type] = e.Lifecycle.Reason
		}
	}
	if reasons[events.AuditSandboxPaused] != "operator" || reasons[events.AuditSnapshotTaken] != "operator" {
		t.Fatalf("lifecycle reasons %v, want the pause and the snapshot by the operator", reasons)
	}
}
