package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// layout is what a guest leaves in /data: a hard link pair, links pointing out (absolute and
// climbing), a setuid copy of busybox, a FIFO, names with odd bytes, a file deleted from the
// image and one added to a directory the image has. (A guest without CAP_MKNOD makes no
// device node; TestRestoredDeviceIsNeverOpenedByTheEngine plants them in a stored layer.)
const layout = `set -e
mkdir -p /data/sub
echo hello > /data/sub/f
ln /data/sub/f /data/hard
ln -s /etc /data/out
ln -s ../../../../.. /data/up
cp /bin/busybox /data/suid && chmod 4755 /data/suid
mkfifo /data/fifo
printf x > "/data/new
line"
printf x > "$(printf '/data/\377\376')"
printf x > /data/-dash
printf x > '/data/back\slash'
printf x > "/data/$(printf 'l%.0s' $(seq 1 200))"
rm /bin/yes
echo motd > /etc/motd
`

// listing describes /data and the image's changed files the same way in any sandbox, so two
// listings are equal exactly when the layouts are (inode numbers aside: the hard link pair is
// checked as a pair).
const listing = `cd /data && find . -exec stat -c '%n|%F|%a|%u:%g|%t:%T|%s' {} + | sort
readlink out; readlink up
[ hard -ef sub/f ] && echo hard-link-kept
[ -f "$(printf '/data/\377\376')" ] && echo odd-bytes-kept
[ -e /bin/yes ] && echo yes-present || echo yes-deleted
cat /etc/motd`

func newBackend(t *testing.T, opts ...actors.Option) (*actors.Backend, actors.SnapshotStore) {
	t.Helper()
	store, err := actors.NewSnapshotDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return itest.NewBackend(t, append([]actors.Option{actors.WithSnapshotStore(store)}, opts...)...), store
}

func spec(t *testing.T) sandbox.Spec {
	return itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
}

// A snapshot keeps the guest's layout as it was; a restore puts a new instance back to it
// (later changes gone, processes new); each fork starts from it and sees none of its
// siblings' writes.
func TestSnapshotRestoreFork(t *testing.T) {
	b, _ := newBackend(t)
	if d := b.Declarations(); !d.Capabilities.Has(sandbox.SnapshotFiles) || !d.Capabilities.Has(sandbox.Fork) {
		t.Fatalf("a backend with a store declares %v", d.Capabilities.Sorted())
	}
	key, sp := itest.NewKey(t), spec(t)
	sb := itest.Acquire(t, b, key, sp)
	ctx := itest.Context(t)
	itest.Sh(t, sb, layout)
	want := itest.Sh(t, sb, listing)
	for _, part := range []string{"hard-link-kept", "yes-deleted", "./suid|regular file|4755",
		"odd-bytes-kept", "\nline|regular file", "./-dash|", "./back\\slash|", "/etc\n../../../../..\n", "motd"} {
		if !strings.Contains(want, part) {
			t.Fatalf("the layout was not made (%q missing):\n%s", part, want)
		}
	}
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
	image := dockertest.Docker(t, "inspect", "-f", "{{.Image}}", sb.InstanceID())
	if snap.Image != image || snap.Key != key || snap.Bytes <= 0 || snap.Entries == 0 || !strings.HasPrefix(snap.Layer, "sha256:") {
		t.Fatalf("snapshot %+v (the sandbox runs %s)", snap, image)
	}
	if got, err := b.DescribeSnapshot(ctx, snap.ID); err != nil || got != snap {
		t.Fatalf("describe = %+v, %v", got, err)
	}
	if list, err := b.Snapshots(ctx, key.Scope, key.ThreadID); err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("snapshots of the conversation = %+v, %v", list, err)
	}

	itest.Sh(t, sb, "rm -rf /data/sub && echo later > /data/later && rm /etc/motd")
	restored, err := b.Restore(ctx, key, sp, snap.ID)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if restored.InstanceID() == sb.InstanceID() {
		t.Fatal("a restore must make a new instance")
	}
	if got := itest.Sh(t, restored, listing); got != want {
		t.Fatalf("restored layout:\n%s\nwant:\n%s", got, want)
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), "/", time.Minute); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("the replaced instance's handle = %v, want gone", err)
	}

	forks := []sandbox.Key{itest.NewKey(t), itest.NewKey(t)}
	for _, k := range forks {
		t.Cleanup(func() { b.Dispose(context.Background(), k, sandbox.DisposeOptions{}) })
	}
	sbs, err := b.Fork(ctx, snap.ID, forks, sp)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	for i, f := range sbs {
		if got := itest.Sh(t, f, listing); got != want {
			t.Fatalf("fork %d layout:\n%s\nwant:\n%s", i, got, want)
		}
	}
	itest.Sh(t, sbs[0], "echo mine > /data/sibling")
	itest.Sh(t, sbs[1], "[ ! -e /data/sibling ]")
	if _, err := b.Fork(ctx, snap.ID, forks[:1], sp); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a fork into a key that has a sandbox = %v, want refused", err)
	}
}

// A device node a snapshot holds is restored as the same node inside the new sandbox (the
// daemon makes it there; a guest without CAP_MKNOD could not), and the engine's file calls
// never open it on the host: a read is refused as not a regular file on every file plane.
func TestRestoredDeviceIsNeverOpenedByTheEngine(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		dir := t.TempDir()
		store, err := actors.NewSnapshotDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		b := itest.NewBackend(t, plane, actors.WithSnapshotStore(store))
		id := plant(t, dir, layerOf(t, &tar.Header{Name: "disk", Typeflag: tar.TypeBlock, Mode: 0o666, Devmajor: 7, Devminor: 0},
			&tar.Header{Name: "zero", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 5}), nil)
		key := itest.NewKey(t)
		t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
		ctx := itest.Context(t)
		restored, err := b.Restore(ctx, key, spec(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := itest.Sh(t, restored, "stat -c '%F %t:%T' /disk /zero"); got != "block special file 7:0\ncharacter special file 1:5\n" {
			t.Fatalf("restored nodes: %q", got)
		}
		for _, p := range []string{"disk", "zero"} {
			_, err := restored.ReadFile(ctx, p, "/", 1024)
			var nr *sandbox.NotRegularError
			if !errors.As(err, &nr) {
				t.Fatalf("read of the restored device %s = %v, want refused as not a regular file", p, err)
			}
		}
	})
}

// A guest file named like a layer's deletion marker cannot be kept faithfully (a layer would
// read it as deleting /etc/passwd), so the snapshot is refused, naming it, and nothing stays
// in the store.
func TestSnapshotRefusesWhiteoutNames(t *testing.T) {
	b, store := newBackend(t)
	key, sp := itest.NewKey(t), spec(t)
	sb := itest.Acquire(t, b, key, sp)
	ctx := itest.Context(t)
	res, err := sb.Exec(ctx, sandbox.Shell("touch /etc/.wh.passwd"), "/", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 && strings.Contains(res.Stderr(), "Invalid argument") {
		t.Skip("this daemon's storage driver (fuse-overlayfs) refuses guests a name beginning with .wh.; " +
			"the refusal of such a name is shown on the layer itself by actors' TestLayerRefusesWhiteoutNames")
	}
	snap, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
	var refused *sandbox.SnapshotRefusedError
	if !errors.As(err, &refused) || refused.Path != "/etc/.wh.passwd" {
		if err == nil {
			if restored, rerr := b.Restore(ctx, key, sp, snap.ID); rerr == nil {
				t.Logf("restored /etc/passwd: %q", itest.Sh(t, restored, "ls -l /etc/passwd || true"))
			}
		}
		t.Fatalf("snapshot = %+v, %v; want the name refused", snap, err)
	}
	if left, _ := store.Unfinished(ctx, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("a refused snapshot left layers: %v", left)
	}
	if list, _ := store.Records(ctx, "", ""); len(list) != 0 {
		t.Fatalf("a refused snapshot left records: %v", list)
	}
}
