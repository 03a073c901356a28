package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// The spread test's size: make test holds scaleSandboxes sandboxes, which proves its
// property (processes of many sandboxes followed at once, every stream whole); make scale
// (MAF_SANDBOX_SCALE=full) holds fullSandboxes, the target.
const (
	scaleSandboxes = 10
	fullSandboxes  = 50
)

func spreadSandboxes(t *testing.T) int {
	switch v := os.Getenv("MAF_SANDBOX_SCALE"); v {
	case "":
		return scaleSandboxes
	case "full":
		return fullSandboxes
	default:
		t.Fatalf("MAF_SANDBOX_SCALE=%q: want full or nothing", v)
		return 0
	}
}

// checkAll waits for each of ids in sb and reads it whole from sequence 0.
func checkAll(t *testing.T, sb sandbox.ProcessRunner, ids []string, lines int) {
	t.Helper()
	for _, id := range ids {
		if p := wait(t, sb, id); p.Exit == nil || p.Exit.ExitCode != 0 {
			t.Errorf("%s: %+v", id, p)
			continue
		}
		out, cut, exit := readAll(t, sb, id, 0, 1<<20)
		if want := writerOutput(id, lines); cut != nil || exit == nil || !bytes.Equal(out, want) {
			t.Errorf("%s: read %d bytes, want %d; cut %v", id, len(out), len(want), cut)
		}
	}
}

// TestHundredProcessesInOneSandbox: 100 processes of one sandbox run at once, each writing,
// and every one's output is stored and read back whole.
func TestHundredProcessesInOneSandbox(t *testing.T) {
	const procs, lines = 100, 500
	srv := natstest.Run(t)
	b, _ := storeBackend(t, natstest.Connect(t, srv))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t)).(*actors.Sandbox)
	ids := make([]string, procs)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%03d", i)
		start(t, sb, sandbox.ProcessSpec{ID: ids[i], Command: sandbox.Shell(writerCommand(ids[i], lines))})
	}
	checkAll(t, sb, ids, lines)
	if ps, err := sb.ListProcesses(itest.Context(t)); err != nil || len(ps) != procs {
		t.Fatalf("list: %d processes, %v", len(ps), err)
	}
}

// TestProcessesAcrossManySandboxes: two processes in each of many sandboxes of one engine,
// all followed at once, every stream whole.
func TestProcessesAcrossManySandboxes(t *testing.T) {
	const lines = 500
	n := spreadSandboxes(t)
	srv := natstest.Run(t)
	b, _ := storeBackend(t, natstest.Connect(t, srv))
	spec := itest.BusyboxSpec(t)
	sbs := make([]*actors.Sandbox, n)
	keys := make([]sandbox.Key, n)
	for i := range keys {
		keys[i] = itest.NewKey(t)
		t.Cleanup(func() { b.Dispose(context.Background(), keys[i], sandbox.DisposeOptions{}) })
	}
	var wg sync.WaitGroup
	for i := range sbs {
		wg.Add(1)
		go func() { // all acquired at once
			defer wg.Done()
			got, err := b.Acquire(itest.Context(t), keys[i], spec)
			if err != nil {
				t.Errorf("acquire %d: %v", i, err)
				return
			}
			sb := got.(*actors.Sandbox)
			sbs[i] = sb
			for j := range 2 {
				id := fmt.Sprintf("s%d-p%d", i, j)
				if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: id, Command: sandbox.Shell(writerCommand(id, lines))}); err != nil {
					t.Errorf("start %s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, sb := range sbs {
		checkAll(t, sb, []string{fmt.Sprintf("s%d-p0", i), fmt.Sprintf("s%d-p1", i)}, lines)
	}
}
