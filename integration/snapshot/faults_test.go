package snapshot

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEngine runs engine serve with its embedded NATS server keeping its JetStream data in
// dir on port, so the next process on the same dir and port finds the snapshots the killed
// one wrote.
func startEngine(t *testing.T, bin, dir string, port int, extra ...string) *itest.Serving {
	t.Helper()
	return itest.Serve(t, bin, nil, append([]string{"--listen", "127.0.0.1:" + strconv.Itoa(port), "--data-dir", dir,
		"--exec-channel=false"}, extra...)...)
}

// waitUntil polls cond every 5 ms for a minute: the moment a fault test kills an engine.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func keyContainers(t *testing.T, key sandbox.Key) []string {
	t.Helper()
	return strings.Fields(dockertest.Docker(t, "ps", "-aq", "--no-trunc", "--filter", "label="+label.Scope+"="+label.Value(key.Scope)))
}

// An engine killed in the middle of a restore leaves the key's previous instance or the new
// one, never neither and never both: the next engine finishes the restore (the previous
// instance, set aside, removed) or undoes it (put back), says which, and one instance is left.
func TestEngineKilledMidRestore(t *testing.T) {
	bin := itest.BuildEngine(t)
	dir, port := t.TempDir(), freePort(t)
	first := startEngine(t, bin, dir, port)
	_, c := itest.ServeClient(t, first.URL)
	key, sp := itest.NewKey(t), spec(t)
	ctx := itest.Context(t)
	sb, err := c.Acquire(ctx, key, sp)
	if err != nil {
		t.Fatal(err)
	}
	itest.Sh(t, sb, "echo before > /mark && dd if=/dev/urandom of=/big bs=1M count=30 2>/dev/null")
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	itest.Sh(t, sb, "echo after > /mark")
	name := strings.TrimPrefix(dockertest.Docker(t, "inspect", "-f", "{{.Name}}", sb.InstanceID()), "/")
	go func() { _, _ = c.Restore(context.Background(), key, sp, snap.ID) }()
	waitUntil(t, "the restore sets the previous instance aside", func() bool {
		out, _, _ := dockertest.DockerErr(ctx, "ps", "-aq", "--filter", "name=^"+name+"-aside$")
		return len(bytes.TrimSpace(out)) > 0
	})
	first.Kill(t)

	second := startEngine(t, bin, dir, port)
	_, c2 := itest.ServeClient(t, second.URL)
	t.Cleanup(func() { c2.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	again, err := c2.Acquire(ctx, key, sp)
	if err != nil {
		t.Fatalf("acquire after the kill: %v\n%s", err, second.Log.String())
	}
	// The router of the next engine then resets the instance, which it never handed out
	// (protocol §8.3 step 7): what matters is that the restore was finished or undone first,
	// said, and that one instance of the key is left.
	log := second.Log.String()
	if !strings.Contains(log, "undid a restore its engine did not finish") && !strings.Contains(log, "finished a restore its engine did not") {
		t.Fatalf("the next engine neither finished nor undid the restore (it says nothing of it):\n%s", log)
	}
	itest.Sh(t, again, "true")
	if ids := keyContainers(t, key); len(ids) != 1 || ids[0] != again.InstanceID() {
		t.Fatalf("containers of the key %v, want only %s", ids, again.InstanceID())
	}
}

// An engine killed in the middle of a snapshot leaves no snapshot anyone is handed: no record
// names the half-written one, the sandbox it froze is thawed by the next engine's acquire (its
// freeze marker says a dead engine's freeze), and a layer it left without a record is removed
// by the next engine, which says so.
func TestEngineKilledMidSnapshot(t *testing.T) {
	bin := itest.BuildEngine(t)
	dir, port := t.TempDir(), freePort(t)
	first := startEngine(t, bin, dir, port)
	_, c := itest.ServeClient(t, first.URL)
	key, sp := itest.NewKey(t), spec(t)
	ctx := itest.Context(t)
	sb, err := c.Acquire(ctx, key, sp)
	if err != nil {
		t.Fatal(err)
	}
	itest.Sh(t, sb, "dd if=/dev/urandom of=/big bs=1M count=200 2>/dev/null")
	go func() { _, _ = sb.(sandbox.Snapshottable).Snapshot(context.Background()) }()
	waitUntil(t, "the snapshot freezes the sandbox", func() bool {
		out, _, _ := dockertest.DockerErr(ctx, "inspect", "-f", "{{.State.Paused}}", sb.InstanceID())
		return strings.TrimSpace(string(out)) == "true"
	})
	// Stopped the moment its freeze shows, the engine is inside the snapshot whatever the
	// machine's speed: a sleep before the kill let a quiet machine finish the snapshot first.
	if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	first.Kill(t)

	second := startEngine(t, bin, dir, port, "--snapshot-unfinished-age", "1ms")
	_, c2 := itest.ServeClient(t, second.URL)
	t.Cleanup(func() { c2.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	if list, err := c2.Snapshots(ctx, key.Scope, key.ThreadID); err != nil || len(list) != 0 {
		t.Fatalf("snapshots after the kill = %+v, %v; want none", list, err)
	}
	again, err := c2.Acquire(ctx, key, sp)
	if err != nil {
		t.Fatalf("acquire after the kill: %v\n%s", err, second.Log.String())
	}
	itest.Sh(t, again, "true")
	if ids := keyContainers(t, key); len(ids) != 1 || ids[0] != again.InstanceID() {
		t.Fatalf("containers of the key %v, want only %s", ids, again.InstanceID())
	}
	log := second.Log.String()
	if !strings.Contains(log, "thawed before reuse: a host left it frozen") {
		t.Fatalf("the next engine does not say it thawed the sandbox the snapshot froze:\n%s", log)
	}
	t.Logf("undid an unfinished layer: %v", strings.Contains(log, "undid a snapshot its engine did not finish"))
}
