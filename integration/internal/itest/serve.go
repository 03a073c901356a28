package itest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/nats-io/nats.go"
)

// BuildEngine builds the engine command into the test's temporary directory.
func BuildEngine(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mafsandbox/engine/cmd/engine").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// StartServe runs "engine serve" on an embedded NATS server, with this
// run's test labels and env added to the test's environment, and stops it (SIGTERM) when the
// test ends, failing the test when the stop takes longer than 15 s. It returns the NATS URL the ready file names.
func StartServe(t *testing.T, env []string, args ...string) string {
	t.Helper()
	bin := BuildEngine(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	all := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--ready-file", ready, "--log-format", "json"}
	for k, v := range dockertest.Labels() {
		all = append(all, "--label", k+"="+v)
	}
	serve := exec.Command(bin, append(all, args...)...)
	serve.Env = append(os.Environ(), env...)
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- serve.Wait() }()
	t.Cleanup(func() {
		stop := time.Now()
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-served:
		case <-time.After(time.Minute):
			_ = serve.Process.Kill()
			<-served
		}
		// Nothing is in flight: a drain that waits out its timeout is a hang, not a drain.
		if d := time.Since(stop); d > 15*time.Second {
			t.Errorf("engine serve took %s to stop with no call in flight", d.Round(time.Second))
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", serveLog.String())
		}
	})
	return WaitReady(t, ready, served)
}

// WaitReady waits for serve to write its ready file and returns the URL in it. served must be
// buffered: an exit it reads is put back, so the caller's clean-up, which waits for the exit
// too, does not wait forever for a process that has already ended.
func WaitReady(t *testing.T, path string, served chan error) string {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case err := <-served:
			served <- err
			t.Fatalf("engine serve exited before it was ready: %v", err)
		case <-deadline:
			t.Fatalf("engine serve was not ready within 2 minutes")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ServeClient connects to the engine serve at natsURL (the URL StartServe returns) and makes a
// Go client of it; the connection is closed when the test ends.
func ServeClient(t testing.TB, natsURL string) (*nats.Conn, *client.Backend) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("connect to %s: %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(Context(t), nc)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return nc, c
}
