package actors

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

var stagingRm = regexp.MustCompile(`^exec rm -f -- /tmp/\.maf-write-[0-9a-f]{32}$`)

// afterLast returns the calls that follow the last one equal to call.
func afterLast(calls []string, call string) []string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i] == call {
			return calls[i+1:]
		}
	}
	return nil
}

// A staged write removes its staging name after the thaw, on success and when the archive
// failed; the rm check runs once per instance, before the first freeze.
func TestStagedWriteRemovesItsStagingName(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	defer b.Close(context.Background())
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "a", []byte("x"), "/tmp"); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if n := slices.Index(calls, "exec rm -rf --"); n < 0 || n > slices.Index(calls, "pause") {
		t.Fatalf("no rm check before the freeze: %v", calls)
	}
	if tail := afterLast(calls, "unpause"); len(tail) != 1 || !stagingRm.MatchString(tail[0]) {
		t.Fatalf("after the thaw = %v, want one rm of the staging name", tail)
	}
	boom := errors.New("daemon refused the archive")
	f.onCopy = func() error { return boom }
	if err := sb.WriteFile(ctx, "b", []byte("x"), "/tmp"); !errors.Is(err, boom) {
		t.Fatalf("write = %v, want the archive's error", err)
	}
	calls = f.Calls()
	if n := slices.Index(calls, "exec rm -rf --"); slices.Contains(calls[n+1:], "exec rm -rf --") {
		t.Fatalf("rm checked again on the same instance: %v", calls)
	}
	if tail := afterLast(calls, "unpause"); len(tail) != 1 || !stagingRm.MatchString(tail[0]) {
		t.Fatalf("after the failed write's thaw = %v, want one rm of the staging name", tail)
	}
}

// An image whose rm fails the check writes in place: no staging name, nothing run after the
// thaw, and the check is not repeated.
func TestWriteWithoutRmGoesInPlace(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	defer b.Close(context.Background())
	ctx := context.Background()
	f.onExec = func(_ context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		if req.Argv[0] == "rm" {
			return docker.ExecOutput{ExitCode: 127, Stdout: []byte("executable file not found")}, nil
		}
		return docker.ExecOutput{}, nil
	}
	for _, p := range []string{"a", "b"} {
		if err := sb.WriteFile(ctx, p, []byte("x"), "/tmp"); err != nil {
			t.Fatal(err)
		}
	}
	calls := f.Calls()
	if n := strings.Count(strings.Join(calls, "\n"), "exec rm"); n != 1 {
		t.Fatalf("%d rm execs, want the one check: %v", n, calls)
	}
	if tail := afterLast(calls, "unpause"); slices.ContainsFunc(tail, func(c string) bool { return strings.HasPrefix(c, "exec") }) {
		t.Fatalf("ran a command after writing in place: %v", tail)
	}
}

// An rm check that does not complete fails the write before any freeze: the exec may still be
// starting, and a freeze must never race an exec's start.
func TestUnfinishedRmCheckFailsTheWriteUnfrozen(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	defer b.Close(context.Background())
	lost := errors.New("exec lost")
	f.onExec = func(context.Context, docker.ExecRequest) (docker.ExecOutput, error) { return docker.ExecOutput{}, lost }
	if err := sb.WriteFile(context.Background(), "a", []byte("x"), "/tmp"); !errors.Is(err, lost) {
		t.Fatalf("write = %v, want the check's error", err)
	}
	if calls := f.Calls(); slices.Contains(calls, "pause") || slices.Contains(calls, "cp-in") {
		t.Fatalf("froze or wrote after an unfinished check: %v", calls)
	}
}

// A staging rm that times out discards the container like every exec timeout, so the write
// that landed still fails, with the timeout; an rm that merely fails leaves the write a success.
func TestStagingRmOutcomes(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	b.cfg.CommandTimeout = 300 * time.Millisecond
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithRequires()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	f.onExec = func(_ context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		if strings.Join(req.Argv[:2], " ") == "rm -f" {
			return docker.ExecOutput{ExitCode: 1, Stderr: []byte("rm: permission denied")}, nil
		}
		return docker.ExecOutput{}, nil
	}
	if err := sb.WriteFile(ctx, "a", []byte("x"), "/tmp"); err != nil {
		t.Fatalf("a write whose staging rm failed = %v, want success", err)
	}
	f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		if strings.Join(req.Argv[:2], " ") == "rm -f" {
			<-ctx.Done()
			return docker.ExecOutput{}, ctx.Err()
		}
		return docker.ExecOutput{}, nil
	}
	var timeout *sandbox.TimeoutError
	if err := sb.WriteFile(ctx, "b", []byte("x"), "/elsewhere"); !errors.As(err, &timeout) {
		t.Fatalf("a write whose staging rm timed out = %v, want a TimeoutError", err)
	}
	if calls := f.Calls(); !slices.Contains(calls, "rm "+short(sb.InstanceID())) {
		t.Fatalf("the container was not discarded: %v", calls[len(calls)-4:])
	}
}
