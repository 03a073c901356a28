package console

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestConsoleTailsAProcess: the page lists a sandbox's processes and tails one live, in
// headless chromium: its lines appear while it still runs, and its end is shown with them all.
func TestConsoleTailsAProcess(t *testing.T) {
	p := startPoolWith(t, nil, actors.WithExecChannel(itest.ExecSupervisor(t)))
	_, pageURL := p.startConsole(t, operatorUser)
	ctx := browser(t)
	remote := p.engine.Remote(t)
	sb := itest.AcquireRemote(t, remote, p.engine.Backend, itest.NewKey(t), itest.BusyboxSpec(t)).(*client.Sandbox)
	if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: "ticker",
		Command: sandbox.Shell("i=0; while [ $i -lt 40 ]; do echo line-$i; i=$((i+1)); sleep 0.1; done")}); err != nil {
		t.Fatal(err)
	}
	row := `#sandboxes tr[data-instance="` + sb.InstanceID() + `"]`
	if err := within(t, ctx, 30*time.Second, chromedp.Navigate(pageURL), chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Click(row+` button.processes`, chromedp.ByQuery),
		chromedp.WaitVisible(`#processes tbody tr[data-process="ticker"]`, chromedp.ByQuery),
		chromedp.Click(`#processes tbody tr[data-process="ticker"] td`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never listed the sandbox's process: %v", err)
	}
	if err := within(t, ctx, 10*time.Second, chromedp.Poll(`document.getElementById("tail").textContent.includes("line-3\n") &&
		document.getElementById("tail").dataset.ended === ""`, nil)); err != nil {
		t.Fatalf("the tail showed no line while the process ran: %v", err)
	}
	var tail string
	if err := within(t, ctx, 30*time.Second, chromedp.Poll(`document.getElementById("tail").dataset.ended === "exited"`, nil),
		chromedp.Text(`#tail`, &tail, chromedp.ByQuery)); err != nil {
		t.Fatalf("the tail never showed the end: %v", err)
	}
	want := ""
	for i := range 40 {
		want += "line-" + itoa(i) + "\n"
	}
	if tail != want {
		t.Fatalf("the tail shows %q, want every line once", tail)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
