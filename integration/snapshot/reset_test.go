package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// Reset, without a snapshot store, makes the sandbox again from its spec's image under the
// key's name: what the guest wrote is gone, the process it left running is gone, the instance
// ID is new and the handle addresses it; the previous container and the one set aside while
// the new one was made are both gone; the key's next acquire reuses the new instance. The
// backend declares the protocol's snapshot capability for it.
func TestResetRemakesTheSandboxFromItsImage(t *testing.T) {
	b := itest.NewBackend(t)
	if !b.Declarations().Capabilities.Has(sandbox.Snapshot) {
		t.Fatalf("the backend declares %v, without snapshot", b.Declarations().Capabilities.Sorted())
	}
	key, sp := itest.NewKey(t), spec(t)
	sb := itest.Acquire(t, b, key, sp)
	itest.Sh(t, sb, "echo mine > /mark && rm /bin/yes && (sleep 600 </dev/null >/dev/null 2>&1 &)")
	if got := itest.Sh(t, sb, "ps -o args | grep -c '^sleep 600' || true"); strings.TrimSpace(got) != "1" {
		t.Fatalf("the background process is not running: %q", got)
	}
	old := sb.InstanceID()
	ctx := itest.Context(t)
	if err := sb.Reset(ctx, time.Minute); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if sb.InstanceID() == old {
		t.Fatal("a reset must make a new instance")
	}
	if got := itest.Sh(t, sb, "[ -e /mark ] && echo mark-kept; [ -e /bin/yes ] && echo yes-back; ps -o args | grep -c '^sleep 600' || true"); got != "yes-back\n0\n" {
		t.Fatalf("after the reset the sandbox says %q, want the image's files and no process of before", got)
	}
	name := docker.ContainerName(key, sp.Kind, "")
	for _, gone := range []string{old, docker.AsideName(name)} {
		if _, _, err := dockertest.DockerErr(ctx, "inspect", gone); err == nil {
			t.Errorf("%s outlived the reset", gone)
		}
	}
	again := itest.Acquire(t, b, key, sp)
	if again.InstanceID() != sb.InstanceID() {
		t.Fatalf("the key's next acquire got %s, want the reset instance %s", again.InstanceID(), sb.InstanceID())
	}
	if a, ok := again.(sandbox.Acquired); !ok || a.AcquireOutcome() != sandbox.OutcomeReused {
		t.Fatalf("the key's next acquire: %v", again)
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	if err := sb.Reset(ctx, time.Minute); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("a reset of a disposed sandbox = %v, want gone", err)
	}
	if _, _, err := dockertest.DockerErr(ctx, "inspect", name); err == nil {
		t.Fatalf("a reset of a disposed sandbox made %s again", name)
	}
}

// A restored sandbox's reset goes back to the snapshot it was restored from, not to the image.
func TestResetOfARestoredSandboxReturnsToItsSnapshot(t *testing.T) {
	b, _ := newBackend(t)
	key, sp := itest.NewKey(t), spec(t)
	sb := itest.Acquire(t, b, key, sp)
	ctx := itest.Context(t)
	itest.Sh(t, sb, "echo snapped > /mark")
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	restored, err := b.Restore(ctx, key, sp, snap.ID)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	itest.Sh(t, restored, "echo later > /mark")
	if err := restored.Reset(ctx, time.Minute); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if got := itest.Sh(t, restored, "cat /mark"); got != "snapped\n" {
		t.Fatalf("after the reset /mark holds %q, want the snapshot's", got)
	}
}
