package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/sandbox"
)

// acts records every act the backend reports.
type acts struct {
	sandbox.NopObserver
	mu    sync.Mutex
	execs []sandbox.ExecFinished
	files []sandbox.FileCrossed
	reset []sandbox.SandboxReset
}

func (a *acts) ExecFinished(_ context.Context, e sandbox.ExecFinished) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.execs = append(a.execs, e)
}

func (a *acts) FileCrossed(_ context.Context, f sandbox.FileCrossed) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files = append(a.files, f)
}

func (a *acts) SandboxReset(_ context.Context, r sandbox.SandboxReset) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reset = append(a.reset, r)
}

// The backend reports each act on its sandboxes where it happens, with the sandbox's key, kind
// and instance: a command by its digest (never its text), a file crossing by its size and
// digest, a refusal with its error; a call made within a larger act its caller reports
// (sandbox.WithinAct) is none of them.
func TestActsReportedWhereTheyHappen(t *testing.T) {
	defer goleak.VerifyNone(t)
	obs := &acts{}
	b := newTestBackend(t, newFakeEngine(), WithObserver(obs))
	ctx := context.Background()
	spec := testSpec(t)
	sb, err := b.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("echo", "secret"), "/", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "a.txt", []byte("hello"), ""); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, MaxBytesPerFile+1)
	var capErr *sandbox.TransferCapExceededError
	if err := sb.WriteFile(ctx, "big.bin", big, ""); !errors.As(err, &capErr) {
		t.Fatalf("an oversized write: %v", err)
	}
	if _, err := sb.RunCode(ctx, "print(1)", time.Minute); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("run code: %v", err)
	}
	inner := sandbox.WithinAct(ctx)
	if _, err := sb.Exec(inner, sandbox.Shell("true"), "/", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(inner, "b.txt", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	old := sb.InstanceID()
	if err := sb.Reset(ctx, time.Minute); err != nil {
		t.Fatalf("reset: %v", err)
	}
	b.Close(ctx)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	act := sandbox.Act{Key: testKey, Kind: spec.Kind, Backend: BackendName, InstanceID: old}
	same := func(got sandbox.Act) bool { got.Took, got.Err = 0, nil; return got == act }
	if len(obs.execs) != 2 {
		t.Fatalf("%d commands reported, want 2 (the exec, the refused code): %+v", len(obs.execs), obs.execs)
	}
	argv0, sum := sandbox.CommandDigest([]string{"echo", "secret"}, "", sandbox.FormArgv)
	if e := obs.execs[0]; !same(e.Act) || e.Err != nil || e.Form != sandbox.FormArgv || e.Argv0 != argv0 || argv0 != "echo" ||
		e.CommandSHA256 != sum || e.ExitCode != 0 {
		t.Errorf("exec reported as %+v", e)
	}
	if e := obs.execs[1]; !same(e.Act) || !errors.Is(e.Err, sandbox.ErrUnsupported) || e.Form != sandbox.FormCode {
		t.Errorf("run code reported as %+v", e)
	}
	if len(obs.files) != 2 {
		t.Fatalf("%d file crossings reported, want 2: %+v", len(obs.files), obs.files)
	}
	hello := sha256.Sum256([]byte("hello"))
	if f := obs.files[0]; !same(f.Act) || f.Err != nil || f.Direction != sandbox.DirectionIn || f.Path != "a.txt" || f.Size != 5 ||
		f.SHA256 != hex.EncodeToString(hello[:]) {
		t.Errorf("write reported as %+v", f)
	}
	if f := obs.files[1]; !errors.As(f.Err, &capErr) || f.Size != 0 || f.SHA256 != "" || f.Path != "big.bin" {
		t.Errorf("refused write reported as %+v", f)
	}
	if len(obs.reset) != 1 || obs.reset[0].Err != nil || obs.reset[0].Previous != old || obs.reset[0].InstanceID == old ||
		obs.reset[0].InstanceID != sb.InstanceID() || obs.reset[0].Key != testKey {
		t.Errorf("reset reported as %+v", obs.reset)
	}
}
