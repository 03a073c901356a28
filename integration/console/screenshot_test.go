package console

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// screenshotEnv names where TestConsoleScreenshot writes its picture (make console-screenshot
// sets it to docs/console.png); unset, it goes to the test's temporary directory.
const screenshotEnv = "MAF_SANDBOX_CONSOLE_SCREENSHOT"

// TestConsoleScreenshot puts the page under a little load — sandboxes in three conversations,
// commands in each, one disposed — and takes its picture in headless chromium: a PNG of the
// page showing every sandbox still held.
func TestConsoleScreenshot(t *testing.T) {
	p := startPool(t)
	_, pageURL := p.startConsole(t, operatorUser)
	tab := browser(t)
	if err := within(t, tab, 30*time.Second, chromedp.EmulateViewport(1400, 1000), chromedp.Navigate(pageURL),
		chromedp.WaitVisible(`#engines tbody tr`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never showed the engine: %v", err)
	}
	remote := p.engine.Remote(t)
	spec := itest.BusyboxSpec(t)
	var (
		wg   sync.WaitGroup
		keys []sandbox.Key
	)
	for i := range 6 {
		key := itest.NewKey(t)
		key.Scope = fmt.Sprintf("tenant-%d", i%3+1) + key.Scope[2:]
		key.AgentID = fmt.Sprintf("agent-%d", i)
		sb := itest.AcquireRemote(t, remote, p.engine.Backend, key, spec)
		keys = append(keys, key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				itest.Sh(t, sb, "echo working; sleep 0.2")
			}
		}()
	}
	wg.Wait()
	if f := remote.Dispose(itest.Context(t), keys[0], sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	var shot []byte
	if err := within(t, tab, 30*time.Second,
		chromedp.Poll(`document.querySelectorAll("#sandboxes tbody tr").length === 5`, nil),
		chromedp.Sleep(1500*time.Millisecond), // the plot redraws within a second of the last event
		chromedp.CaptureScreenshot(&shot)); err != nil {
		t.Fatalf("the page under load: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("the screenshot is no page-sized PNG (%v)", err)
	}
	out := os.Getenv(screenshotEnv)
	if out == "" {
		out = filepath.Join(t.TempDir(), "console.png")
	}
	if err := os.WriteFile(out, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(shot))
}
