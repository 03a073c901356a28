package lifecycle

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// streamFunc runs cmd in a sandbox, handing emit its output as it comes.
type streamFunc func(ctx context.Context, cmd sandbox.Command, emit func(stream string, p []byte)) (sandbox.ExecResult, error)

// requireLiveOutput runs a command that prints, then waits for a file that a second exec
// creates only once the first stdout chunk came in: the command can end only if its output
// arrived while it ran, so the test proves liveness without timing anything. A backend that
// gave the output only at the end would make the command time out instead.
func requireLiveOutput(t *testing.T, sb sandbox.Sandbox, run streamFunc) {
	t.Helper()
	ctx := itest.Context(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	flag := "/tmp/stream-" + hex.EncodeToString(b)
	var (
		mu             sync.Mutex
		events         []string
		stdout, stderr bytes.Buffer
		returned       bool
		once           sync.Once
	)
	seen := make(chan struct{})
	emit := func(stream string, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Errorf("emit after the exec returned: %s %q", stream, p)
		}
		switch stream {
		case "stdout":
			stdout.Write(p)
			if strings.Contains(stdout.String(), "a\n") {
				once.Do(func() { events = append(events, "first chunk"); close(seen) })
			}
		case "stderr":
			stderr.Write(p)
		default:
			t.Errorf("stream %q", stream)
		}
	}
	touched := make(chan error, 1)
	go func() {
		select {
		case <-seen:
		case <-ctx.Done():
			touched <- errors.New("no chunk came while the command ran")
			return
		}
		res, err := sb.Exec(ctx, sandbox.Argv("touch", flag), "/", time.Minute)
		if err == nil && res.ExitCode != 0 {
			err = errors.New("touch: " + res.Stderr())
		}
		mu.Lock()
		events = append(events, "touched")
		mu.Unlock()
		touched <- err
	}()
	script := `echo a; echo e >&2; while [ ! -e ` + flag + ` ]; do sleep 0.05; done; echo b`
	res, err := run(ctx, sandbox.Shell(script), emit)
	mu.Lock()
	returned = true
	events = append(events, "returned")
	mu.Unlock()
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if err := <-touched; err != nil {
		t.Fatalf("second exec: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(events, ", "), "first chunk, touched, returned"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if res.ExitCode != 0 || res.Stdout() != "a\nb\n" || res.Stderr() != "e\n" {
		t.Fatalf("result %+v", res)
	}
	if stdout.String() != res.Stdout() || stderr.String() != res.Stderr() {
		t.Fatalf("streamed %q and %q, result %q and %q", stdout.String(), stderr.String(), res.Stdout(), res.Stderr())
	}
}

// TestStreamingExec streams an exec's output from the Docker engine through the actors
// backend while the command runs.
func TestStreamingExec(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	live, ok := sb.(sandbox.StreamingExec)
	if !ok {
		t.Fatalf("%T is not a sandbox.StreamingExec", sb)
	}
	requireLiveOutput(t, sb, func(ctx context.Context, cmd sandbox.Command, emit func(string, []byte)) (sandbox.ExecResult, error) {
		return live.ExecStreaming(ctx, cmd, "/", 30*time.Second, 0, emit)
	})
}

// TestStreamingExecWithinBudget checks that a bounded streaming exec keeps its budget: it
// fails with the limit error and emits no more than the budget.
func TestStreamingExecWithinBudget(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	var mu sync.Mutex
	n := 0
	_, err := sb.(sandbox.StreamingExec).ExecStreaming(itest.Context(t), sandbox.Shell("yes"), "/", 30*time.Second, 4096, func(_ string, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		n += len(p)
	})
	var le *sandbox.ExecOutputLimitExceededError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want the output limit error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n > 4096 {
		t.Fatalf("emitted %d bytes over a budget of 4096", n)
	}
}

// TestServiceStreamsBeforeTheCommandEnds streams an exec's output from the Docker engine
// over NATS: a chunk reaches the client while the command still runs.
func TestServiceStreamsBeforeTheCommandEnds(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), itest.BusyboxSpec(t))
	requireLiveOutput(t, sb, func(ctx context.Context, cmd sandbox.Command, emit func(string, []byte)) (sandbox.ExecResult, error) {
		return sb.(*client.Sandbox).ExecStream(ctx, cmd, "/", 30*time.Second, emit)
	})
}
