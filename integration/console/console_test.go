package console

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/messages"
)

// TestConsoleInBrowser drives the console's page in headless chromium against an engine on
// real Docker: a sandbox the test acquires is listed within 2 s (from the audit stream);
// opening it shows its audit events; a console whose NATS user may not dispose shows the
// button greyed and is refused, the sandbox untouched; the operator's console disposes the
// exact instance from the button, and the engine and the daemon confirm it gone.
func TestConsoleInBrowser(t *testing.T) {
	p := startPool(t)
	_, pageURL := p.startConsole(t, operatorUser)
	ctx := browser(t)
	if err := within(t, ctx, 30*time.Second, chromedp.Navigate(pageURL),
		chromedp.WaitVisible(`#engines tbody tr`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("can-dispose").textContent === "allowed"`, nil)); err != nil {
		t.Fatalf("the operator's page never showed an engine and dispose allowed: %v", err)
	}
	var identity string
	if err := within(t, ctx, 5*time.Second, chromedp.Text(`#identity`, &identity, chromedp.ByQuery)); err != nil || identity != "NATS user operator" {
		t.Fatalf("the page says it acts as %q (%v)", identity, err)
	}

	remote := p.engine.Remote(t)
	key := itest.NewKey(t)
	sb := itest.AcquireRemote(t, remote, p.engine.Backend, key, itest.BusyboxSpec(t))
	row := `#sandboxes tr[data-instance="` + sb.InstanceID() + `"]`
	acquired := time.Now()
	if err := within(t, ctx, 2*time.Second, chromedp.WaitVisible(row, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page did not list the acquired sandbox within 2 s: %v", err)
	}
	t.Logf("listed %s after %s", sb.InstanceID()[:12], time.Since(acquired).Round(time.Millisecond))
	var text string
	if err := within(t, ctx, 5*time.Second, chromedp.Text(row, &text, chromedp.ByQuery)); err != nil ||
		!strings.Contains(text, key.Scope) || !strings.Contains(text, "closed") || !strings.Contains(text, "live") {
		t.Fatalf("row %q (%v): want its scope, egress mode and state", text, err)
	}

	t.Run("open shows its audit", func(t *testing.T) {
		itest.Sh(t, sb, "echo hi")
		if err := within(t, ctx, 5*time.Second, chromedp.Click(row+` td`, chromedp.ByQuery),
			chromedp.WaitVisible(`#audit-panel`, chromedp.ByQuery),
			chromedp.Poll(`[...document.querySelectorAll("#audit tbody tr")].some(r => r.textContent.includes("exec.finished"))`, nil),
			chromedp.Poll(`[...document.querySelectorAll("#audit tbody tr")].some(r => r.textContent.includes("sandbox.acquired"))`, nil)); err != nil {
			t.Fatalf("the opened sandbox's audit events never showed its acquire and exec: %v", err)
		}
	})

	t.Run("the plot counts the acquire and the exec", func(t *testing.T) {
		if err := within(t, ctx, 3*time.Second, chromedp.Poll(`Number(document.getElementById("plot").dataset.acquires) >= 1 &&
			Number(document.getElementById("plot").dataset.execs) >= 1 && document.getElementById("plot-acquires").getAttribute("points") !== ""`, nil)); err != nil {
			t.Fatalf("the activity plot never counted the acquire and the exec: %v", err)
		}
		if err := within(t, ctx, 3*time.Second, chromedp.Poll(`Number(document.getElementById("latency").dataset.samples) >= 2 &&
			document.getElementById("latency-acquires").getAttribute("points") !== "" &&
			document.getElementById("latency-execs").getAttribute("points") !== ""`, nil)); err != nil {
			t.Fatalf("the latency plot never drew the acquire's and the exec's durations: %v", err)
		}
	})

	// The console's own permission probes (bad requests by design) are refusals, not the
	// engine's errors; and the latency plot marks the one minute with calls that its legend
	// names, where a line needs two.
	t.Run("the engine's errors are its own, and the latency plot shows what its legend says", func(t *testing.T) {
		itest.Sh(t, sb, "echo timed") // a command of this minute, whatever ran before
		engineRow := `#engines tbody tr[data-engine="` + p.engine.Service.EngineID() + `"]`
		if err := within(t, ctx, 10*time.Second, chromedp.Poll(`(() => {
			const cells = document.querySelector('`+engineRow+`').cells;
			return cells[6].textContent === "0" && Number(cells[7].textContent) >= 2;
		})()`, nil)); err != nil {
			var row string
			_ = within(t, ctx, 5*time.Second, chromedp.Text(engineRow, &row, chromedp.ByQuery))
			t.Fatalf("the engine's row counts the console's probes as its errors, or not as refusals: %q (%v)", row, err)
		}
		if err := within(t, ctx, 12*time.Second, chromedp.Poll(`(() => {
			const legend = document.getElementById("latency-numbers").textContent;
			return /acquire \d+ ms/.test(legend) && /exec \d+ ms/.test(legend) &&
				document.querySelectorAll("#latency-acquire-dots circle").length >= 1 &&
				document.querySelectorAll("#latency-exec-dots circle").length >= 1;
		})()`, nil)); err != nil {
			var legend string
			_ = within(t, ctx, 5*time.Second, chromedp.Text(`#latency-numbers`, &legend, chromedp.ByQuery))
			t.Fatalf("the latency legend names durations the plot does not mark: %q (%v)", legend, err)
		}
	})

	t.Run("a user without permission cannot dispose", func(t *testing.T) {
		_, viewerURL := p.startConsole(t, viewerUser)
		tab := browser(t) // the viewer's own browser
		if err := within(t, tab, 30*time.Second, chromedp.Navigate(viewerURL),
			chromedp.WaitVisible(row, chromedp.ByQuery),
			chromedp.Poll(`document.getElementById("can-dispose").textContent === "denied"`, nil)); err != nil {
			t.Fatalf("the viewer's page never showed the sandbox with dispose denied: %v", err)
		}
		if err := within(t, tab, 5*time.Second, chromedp.Poll(
			`document.querySelector('`+row+` button.dispose').disabled === true`, nil)); err != nil {
			t.Fatalf("the viewer's dispose button is not greyed: %v", err)
		}
		if err := within(t, tab, 5*time.Second, chromedp.Click(row+` td`, chromedp.ByQuery), chromedp.WaitVisible(`#audit-panel`, chromedp.ByQuery),
			chromedp.Poll(`document.getElementById("purge").disabled === true`, nil)); err != nil {
			t.Fatalf("the viewer's purge button is not greyed: %v", err)
		}
		// The greyed button is not the defence: a request the page would send is refused too.
		body := `{"key":{"scope":"` + key.Scope + `","thread_id":"` + key.ThreadID + `","agent_id":"` + key.AgentID +
			`"},"kind":"shell","instance_id":"` + sb.InstanceID() + `"}`
		if code := pageAction(t, viewerURL, "api/dispose", body); code != http.StatusForbidden {
			t.Fatalf("the viewer's dispose answered %d, want 403", code)
		}
		list, err := remote.ListSandboxes(itest.Context(t), p.engine.Service.EngineID(), messages.APIListSandboxesRequest{Scope: key.Scope})
		if err != nil || list.Total != 1 {
			t.Fatalf("after the viewer's refused dispose the engine lists %+v (%v), want the sandbox", list, err)
		}
	})

	t.Run("dispose from the button", func(t *testing.T) {
		if err := within(t, ctx, 30*time.Second, chromedp.Click(row+` button.dispose`, chromedp.ByQuery),
			chromedp.WaitNotPresent(row, chromedp.ByQuery),
			chromedp.Poll(`document.getElementById("action-result").textContent.startsWith("disposed")`, nil)); err != nil {
			t.Fatalf("the dispose button did not dispose: %v", err)
		}
		list, err := remote.ListSandboxes(itest.Context(t), p.engine.Service.EngineID(), messages.APIListSandboxesRequest{Scope: key.Scope})
		if err != nil || list.Total != 0 {
			t.Fatalf("after the dispose the engine lists %+v (%v), want nothing", list, err)
		}
		if out, err := exec.Command("docker", "inspect", "--format", "{{.Id}}", sb.InstanceID()).CombinedOutput(); err == nil {
			t.Fatalf("the daemon still has the disposed instance: %s", out)
		}
	})

	t.Run("purge from the button", func(t *testing.T) {
		other := itest.NewKey(t)
		sb := itest.AcquireRemote(t, remote, p.engine.Backend, other, itest.BusyboxSpec(t))
		row := `#sandboxes tr[data-instance="` + sb.InstanceID() + `"]`
		if err := within(t, ctx, 30*time.Second, chromedp.WaitVisible(row, chromedp.ByQuery), chromedp.Click(row+` td`, chromedp.ByQuery),
			chromedp.WaitVisible(`#audit-panel`, chromedp.ByQuery), chromedp.Click(`#purge`, chromedp.ByQuery),
			chromedp.WaitNotPresent(row, chromedp.ByQuery),
			chromedp.Poll(`document.getElementById("action-result").textContent.startsWith("purged")`, nil)); err != nil {
			t.Fatalf("the purge button did not purge: %v", err)
		}
		list, err := remote.ListSandboxes(itest.Context(t), p.engine.Service.EngineID(), messages.APIListSandboxesRequest{Scope: other.Scope})
		if err != nil || list.Total != 0 {
			t.Fatalf("after the purge the engine lists %+v (%v), want nothing", list, err)
		}
	})
}
