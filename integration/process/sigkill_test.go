package process

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// placedServe runs "engine serve --placement" with engine ID id on the NATS server url.
func placedServe(t *testing.T, bin, url, id string) *itest.Serving {
	t.Helper()
	return itest.Serve(t, bin, nil, "--nats-url", url, "--placement", "--placement-replicas", "1", "--engine-id", id,
		"--data-dir", filepath.Join(t.TempDir(), "data"))
}

// TestEngineSIGKILLedWithTenProcesses: an engine (engine serve --placement) is SIGKILLed
// while ten processes write; a second engine takes the sandbox over once the first's lease
// lapses, follows all ten again, and every stream is complete with no byte stored twice. It
// logs the time from the kill to the takeover and from the takeover to all ten followed.
func TestEngineSIGKILLedWithTenProcesses(t *testing.T) {
	const procs, lines = 10, 6000
	srv := natstest.Run(t)
	bin := itest.BuildEngine(t)
	first := placedServe(t, bin, srv.ClientURL(), "kill-first")
	placedServe(t, bin, srv.ClientURL(), "kill-second")
	nc := natstest.Connect(t, srv)
	pool, err := client.New(itest.Context(t), nc)
	if err != nil {
		t.Fatal(err)
	}
	key, spec := itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.Processes))
	t.Cleanup(func() { pool.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
	var sb *client.Sandbox
	for sb == nil || sb.Engine() != "kill-first" {
		if sb != nil { // the pool gave the key to the other engine: take another key
			key = itest.NewKey(t)
		}
		got, err := pool.Acquire(itest.Context(t), key, spec)
		if err != nil {
			t.Fatal(err)
		}
		sb = got.(*client.Sandbox)
		if sb.Engine() != "kill-first" {
			pool.Dispose(itest.Context(t), key, sandbox.DisposeOptions{})
		}
	}
	for i := range procs {
		id := fmt.Sprintf("w%d", i)
		start(t, sb, sandbox.ProcessSpec{ID: id, Command: sandbox.Shell(writerCommand(id, lines))})
	}
	for i := range procs {
		waitOutput(t, sb, fmt.Sprintf("w%d", i), "-100\n")
	}
	first.Kill(t)
	killed := time.Now()

	var taken *client.Sandbox
	for taken == nil {
		got, err := pool.Acquire(itest.Context(t), key, spec)
		switch {
		case err == nil:
			taken = got.(*client.Sandbox)
		case !errors.Is(err, messages.ErrUnavailable) || time.Since(killed) > time.Minute:
			t.Fatalf("acquire after the kill: %v", err)
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	tookOver := time.Now()
	if taken.Engine() != "kill-second" || taken.InstanceID() != sb.InstanceID() {
		t.Fatalf("taken over by %s, instance %.12s (was %.12s)", taken.Engine(), taken.InstanceID(), sb.InstanceID())
	}
	// Followed again: each process's stored output grows past what the first engine stored.
	for i := range procs {
		id := fmt.Sprintf("w%d", i)
		ps, err := taken.ListProcesses(itest.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		for _, p := range ps {
			if p.ID == id {
				stored = p.Output
			}
		}
		if _, err := taken.ReadProcessOutput(itest.Context(t), id, stored/2, sandbox.ReadOptions{Wait: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("SIGKILL → taken over: %s; taken over → %d processes followed again: %s",
		tookOver.Sub(killed).Round(10*time.Millisecond), procs, time.Since(tookOver).Round(10*time.Millisecond))

	streams, err := events.NewProcessStreams(nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range procs {
		id := fmt.Sprintf("w%d", i)
		if p, err := taken.WaitProcess(itest.Context(t), id); err != nil || p.Exit == nil || p.Exit.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", id, p, err)
		}
		want := writerOutput(id, lines)
		out, cut, exit := readAll(t, taken, id, 0, 256<<10)
		if cut != nil || exit == nil || !bytes.Equal(out, want) {
			t.Fatalf("%s: read %d bytes, want %d; cut %v", id, len(out), len(want), cut)
		}
		ref := sandbox.ProcessRef{Key: key, Kind: spec.Kind, Instance: taken.InstanceID(), ID: id}
		if stored := storedOutput(t, nc, streams.Subject(ref)); !bytes.Equal(stored, want) {
			t.Fatalf("%s: the stream holds %d bytes, want %d", id, len(stored), len(want))
		}
	}
}
