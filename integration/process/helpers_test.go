package process

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// channelBackend is a backend whose sandboxes get the supervisor.
func channelBackend(t *testing.T, opts ...actors.Option) *actors.Backend {
	t.Helper()
	return itest.NewBackend(t, append([]actors.Option{actors.WithExecChannel(itest.ExecSupervisor(t))}, opts...)...)
}

// procSandbox acquires a busybox sandbox with the supervisor.
func procSandbox(t *testing.T, opts ...actors.Option) (*actors.Backend, sandbox.Key, *actors.Sandbox) {
	t.Helper()
	b := channelBackend(t, opts...)
	key := itest.NewKey(t)
	return b, key, itest.Acquire(t, b, key, itest.BusyboxSpec(t)).(*actors.Sandbox)
}

func start(t *testing.T, sb sandbox.ProcessRunner, spec sandbox.ProcessSpec) sandbox.Process {
	t.Helper()
	p, err := sb.StartProcess(itest.Context(t), spec)
	if err != nil {
		t.Fatalf("start %v: %v", spec.Command, err)
	}
	return p
}

// readAll reads id's output from seq until its end, a read at a time of at most maxBytes,
// checking that each read starts where the last ended; it returns the bytes, the first cut
// and the exit.
func readAll(t *testing.T, sb sandbox.ProcessRunner, id string, seq, maxBytes int64) ([]byte, *sandbox.OutputCut, *sandbox.ProcessExit) {
	t.Helper()
	ctx := itest.Context(t)
	var out bytes.Buffer
	var cut *sandbox.OutputCut
	for {
		r, err := sb.ReadProcessOutput(ctx, id, seq, sandbox.ReadOptions{MaxBytes: maxBytes, Wait: 5 * time.Second})
		if err != nil {
			t.Fatalf("read %s from %d: %v", id, seq, err)
		}
		if r.Cut != nil {
			if cut == nil {
				cut = r.Cut
			}
			seq = r.Cut.To
		}
		for _, c := range r.Chunks {
			if c.Seq != seq {
				t.Fatalf("read %s: a chunk at %d, want %d", id, c.Seq, seq)
			}
			out.Write(c.Data)
			seq = c.End()
		}
		if r.Next != seq {
			t.Fatalf("read %s: next %d, want %d", id, r.Next, seq)
		}
		if r.Exit != nil {
			return out.Bytes(), cut, r.Exit
		}
		if ctx.Err() != nil {
			t.Fatalf("read %s: no end after %d bytes", id, out.Len())
		}
	}
}

// waitOutput reads id's output until it holds want.
func waitOutput(t *testing.T, sb sandbox.ProcessRunner, id string, want string) []byte {
	t.Helper()
	ctx := itest.Context(t)
	var out []byte
	seq := int64(0)
	for !bytes.Contains(out, []byte(want)) {
		r, err := sb.ReadProcessOutput(ctx, id, seq, sandbox.ReadOptions{Wait: time.Second})
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if r.Cut != nil {
			t.Fatalf("read %s from %d: a cut %+v", id, seq, r.Cut)
		}
		for _, c := range r.Chunks {
			out = append(out, c.Data...)
		}
		seq = r.Next
		if r.Exit != nil && !bytes.Contains(out, []byte(want)) {
			t.Fatalf("%s ended (%+v) before %q: %d bytes ending %q", id, r.Exit, want, len(out), out[max(0, len(out)-200):])
		}
	}
	return out
}

func wait(t *testing.T, sb sandbox.ProcessRunner, id string) sandbox.Process {
	t.Helper()
	p, err := sb.WaitProcess(itest.Context(t), id)
	if err != nil {
		t.Fatalf("wait %s: %v", id, err)
	}
	return p
}

// runExec runs a command and fails the test on an error.
func runExec(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) sandbox.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(itest.Context(t), time.Minute)
	defer cancel()
	r, err := sb.Exec(ctx, cmd, "", time.Minute)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return r
}

// errorsAs reports whether err's chain holds a T.
func errorsAs[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
