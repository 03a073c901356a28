package telemetry

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
)

// startServer runs bin with args, its output in a log file of the test's (printed when the
// test fails), kills it when the test ends, and returns once GET readyURL answers 200.
func startServer(t *testing.T, name, bin, readyURL string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	log, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(readyURL)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("%s exited before it was ready", name)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within a minute: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remoteClient is a Go client of the engine serve at natsURL, on a connection closed when the
// test ends.
func remoteClient(t *testing.T, natsURL string) *client.Backend {
	t.Helper()
	_, c := itest.ServeClient(t, natsURL)
	return c
}
