package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// buildEngine builds this command into a temporary directory, as a developer's go build does
// (VCS stamping as the tree allows), and returns the binary's path.
func buildEngine(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "engine")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/engine: %v\n%s", err, out)
	}
	return bin
}

// result is how a run of the engine binary ended.
type result struct {
	code           int
	stdout, stderr string
}

// runEngine runs bin with args (and env added to the test's environment) and returns its exit
// status and output. It fails the test when the binary cannot be run or does not end in time.
func runEngine(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return result{code: exit.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	case err != nil:
		t.Fatalf("engine %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String()}
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveEngine starts "bin serve" on an embedded NATS server on a free loopback port, with the
// test labels on every container, and returns the URL clients use and its JSON log. Cleanup
// stops it with SIGTERM.
func serveEngine(t *testing.T, bin string) (url string, log *lockedBuffer) {
	t.Helper()
	return serveEngineArgs(t, bin)
}

// serveEngineArgs is [serveEngine] with more serve flags.
func serveEngineArgs(t *testing.T, bin string, extra ...string) (url string, log *lockedBuffer) {
	t.Helper()
	url, log, _ = serveEngineProc(t, bin, extra...)
	return url, log
}

// serveEngineProc is [serveEngineArgs] that also returns the process, for signals.
func serveEngineProc(t *testing.T, bin string, extra ...string) (url string, log *lockedBuffer, proc *os.Process) {
	t.Helper()
	return serveEngineEnv(t, bin, nil, extra...)
}

// serveEngineEnv is [serveEngineProc] with env added to the test's environment.
func serveEngineEnv(t *testing.T, bin string, env []string, extra ...string) (url string, log *lockedBuffer, proc *os.Process) {
	t.Helper()
	return serveEngineIn(t, "", bin, env, extra...)
}

// serveEngineIn is [serveEngineEnv] run in the working directory dir ("": the test's).
func serveEngineIn(t *testing.T, workDir, bin string, env []string, extra ...string) (url string, log *lockedBuffer, proc *os.Process) {
	t.Helper()
	dockertest.Require(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--ready-file", ready, "--log-format", "json"}
	args = append(args, extra...)
	for k, v := range dockertest.Labels() {
		args = append(args, "--label", k+"="+v)
	}
	serve := exec.Command(bin, args...)
	serve.Dir = workDir
	serve.Env = append(os.Environ(), env...)
	log = &lockedBuffer{}
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		t.Fatalf("start engine serve: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- serve.Wait() }()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-served:
		case <-time.After(time.Minute):
			_ = serve.Process.Kill()
			<-served
		}
		if t.Failed() {
			t.Logf("engine serve log:\n%s", log.String())
		}
	})
	deadline := time.After(2 * time.Minute)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b)), log, serve.Process
		}
		select {
		case err := <-served:
			t.Fatalf("engine serve exited before it was ready: %v\n%s", err, log.String())
		case <-deadline:
			t.Fatalf("engine serve was not ready within 2 minutes\n%s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
