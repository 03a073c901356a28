package itest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// StartServe runs "engine serve" on an embedded NATS server ([Serve]) and fails the test when
// its stop at the test's end takes longer than 15 s. It returns the NATS URL the ready file
// names.
func StartServe(t *testing.T, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	s := Serve(t, BuildEngine(t), env, append([]string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}, args...)...)
	t.Cleanup(func() { // runs before Serve's own clean-up, which then finds it stopped
		// Nothing is in flight: a drain that waits out its timeout is a hang, not a drain.
		if d := s.Stop(); d > 15*time.Second {
			t.Errorf("engine serve took %s to stop with no call in flight", d.Round(time.Second))
		}
	})
	return s.URL
}

// Serving is one `engine serve` process a test started with [Serve].
type Serving struct {
	Process *os.Process
	Log     *LogBuffer // what it printed, read while it runs
	URL     string     // the NATS URL its ready file named
	ended   chan error // its exit, put back by whoever reads it
}

// Serve runs bin serve with args, its own ready file, JSON logs and this run's test labels,
// env added to the test's environment, and waits until it is ready. When the test ends it is
// stopped (SIGTERM, SIGKILL after a minute) unless it is gone already, and its log is shown
// if the test failed.
func Serve(t *testing.T, bin string, env []string, args ...string) *Serving {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	all := append([]string{"serve", "--ready-file", ready, "--log-format", "json"}, args...)
	for k, v := range dockertest.Labels() {
		all = append(all, "--label", k+"="+v)
	}
	cmd := exec.Command(bin, all...)
	cmd.Env = append(os.Environ(), env...)
	s := &Serving{Log: &LogBuffer{}, ended: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.Log, s.Log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start engine serve: %v", err)
	}
	s.Process = cmd.Process
	go func() { s.ended <- cmd.Wait() }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("engine serve %s log:\n%s", strings.Join(args, " "), s.Log.String())
		}
	})
	s.URL = WaitReady(t, ready, s.ended)
	return s
}

// Stop sends SIGTERM (SIGKILL after a minute) and waits for the exit; it returns how long the
// stop took, 0 when the process had ended already.
func (s *Serving) Stop() time.Duration {
	began := time.Now()
	select {
	case err := <-s.ended:
		s.ended <- err
		return 0
	default:
	}
	_ = s.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.ended:
		s.ended <- err
	case <-time.After(time.Minute):
		_ = s.Process.Kill()
		s.ended <- <-s.ended
	}
	return time.Since(began)
}

// Kill ends the process with SIGKILL, as a crash would, and waits for the exit.
func (s *Serving) Kill(t *testing.T) {
	t.Helper()
	if err := s.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill engine serve: %v", err)
	}
	s.ended <- <-s.ended
}

// LogBuffer is a buffer a process writes while the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
