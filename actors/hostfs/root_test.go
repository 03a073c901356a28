package hostfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// dirRoot is a Root on a host directory, for the resolution rules without a container.
func dirRoot(t testing.TB) (*Root, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // the guest searches its root
		t.Fatal(err)
	}
	return &Root{id: "test", openRoot: func() (int, error) {
		return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}}, dir
}

func TestResolutionRules(t *testing.T) {
	r, dir := dirRoot(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "w/sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "w/f"), []byte("hello"), 0o644))
	must(os.Symlink("/", filepath.Join(dir, "w/link")))
	must(unix.Mkfifo(filepath.Join(dir, "w/fifo"), 0o644))
	must(os.Chown(filepath.Join(dir, "w"), 1000, 1001)) // the guest's base

	if st, err := r.Stat(ctx, "f", "/w"); err != nil || st.Kind != sandbox.EntryFile || *st.Size != 5 || st.Path != "f" {
		t.Fatalf("stat f = %+v, %v", st, err)
	}
	if st, err := r.Stat(ctx, "link", "/w"); err != nil || st.Kind != sandbox.EntrySymlink {
		t.Fatalf("stat link = %+v, %v (want the link itself)", st, err)
	}
	if st, err := r.Stat(ctx, "absent", "/w"); err != nil || st != nil {
		t.Fatalf("stat absent = %+v, %v", st, err)
	}
	var nc *sandbox.NotConfinedError
	if _, err := r.Read(ctx, "link/etc/passwd", "/w", 1<<20); !errors.As(err, &nc) {
		t.Fatalf("read through a link: %v, want NotConfinedError", err)
	}
	if err := r.Write(ctx, "link/x", "/w", []byte("x"), Owner{}); !errors.As(err, &nc) {
		t.Fatalf("write through a link: %v, want NotConfinedError", err)
	}
	var nd *sandbox.NotDirectoryError
	if _, err := r.Read(ctx, "f/x", "/w", 10); !errors.As(err, &nd) {
		t.Fatalf("read below a file: %v, want NotDirectoryError", err)
	}
	var nr *sandbox.NotRegularError
	if _, err := r.Read(ctx, "fifo", "/w", 10); !errors.As(err, &nr) {
		t.Fatalf("read a fifo: %v, want NotRegularError (and no block)", err)
	}
	if _, err := r.Read(ctx, "link", "/w", 10); !errors.As(err, &nr) {
		t.Fatalf("read a link: %v, want NotRegularError", err)
	}
	var capErr *sandbox.TransferCapExceededError
	if _, err := r.Read(ctx, "f", "/w", 4); !errors.As(err, &capErr) || capErr.Actual != 5 {
		t.Fatalf("read over the cap: %v", err)
	}
	var pe *sandbox.PathError
	if _, err := r.Read(ctx, "nope", "/w", 4); !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read absent: %v", err)
	}
	if b, err := r.Read(ctx, "f", "/w", 5); err != nil || string(b) != "hello" {
		t.Fatalf("read = %q, %v", b, err)
	}

	must(r.Write(ctx, "new/deep/file", "/w", []byte("data"), Owner{UID: 1000, GID: 1001}))
	for _, p := range []string{"w/new", "w/new/deep", "w/new/deep/file"} {
		var st unix.Stat_t
		must(unix.Lstat(filepath.Join(dir, p), &st))
		if st.Uid != 1000 || st.Gid != 1001 {
			t.Fatalf("%s owned %d:%d, want 1000:1001", p, st.Uid, st.Gid)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "w/new/deep/file")); string(b) != "data" {
		t.Fatalf("written %q", b)
	}
	list, err := r.List(ctx, "new/deep", "/w")
	if err != nil || len(list) != 1 || list[0].Path != "new/deep/file" {
		t.Fatalf("list = %+v, %v (no temporary name may remain)", list, err)
	}
	if _, err := r.List(ctx, "link", "/w"); !errors.As(err, &nc) {
		t.Fatalf("list a link: %v, want NotConfinedError", err)
	}

	must(r.Remove(ctx, Removal{Op: "remove", Shown: "new", Abs: "/w/new", WorkDir: "/w", Recursive: true, Guest: Cred{UID: 1000, GID: 1001}}))
	if _, err := os.Lstat(filepath.Join(dir, "w/new")); !os.IsNotExist(err) {
		t.Fatalf("w/new after remove: %v", err)
	}
	must(r.Remove(ctx, Removal{Op: "remove", Shown: "link", Abs: "/w/link", WorkDir: "/w", Guest: Cred{}}))
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal("the link's target went with it")
	}
	if err := r.Remove(ctx, Removal{Op: "remove", Shown: "x", Abs: "/w/link2/x", WorkDir: "/w"}); err != nil {
		t.Fatalf("remove below an absent component: %v", err)
	}
}

// TestRemovalRunsWithTheGuestsAuthority: in a directory the guest may not write, a removal
// the reach rule keeps to the guest is refused by the kernel.
func TestRemovalRunsWithTheGuestsAuthority(t *testing.T) {
	dockertest.RequireRoot(t)
	r, dir := dirRoot(t)
	w := filepath.Join(dir, "w")
	if err := os.MkdirAll(filepath.Join(w, "locked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(w, 1000, 1000); err != nil { // the guest's base: not host-owned
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "locked/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var pe *sandbox.PathError
	err := r.Remove(context.Background(), Removal{Op: "remove", Shown: "locked/f", Abs: "/w/locked/f", WorkDir: "/w", Guest: Cred{UID: 1000, GID: 1000}})
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("remove = %v, want the guest's permission refusal", err)
	}
	if _, err := os.Lstat(filepath.Join(w, "locked/f")); err != nil {
		t.Fatalf("the file went: %v", err)
	}
	if uid, _ := unix.SetfsuidRetUid(-1); uid != 0 {
		t.Fatalf("this thread's fsuid is %d after the removal", uid)
	}
}

// TestKernelFilesystemsAreRefused: a path on procfs or sysfs is outside the contract, and the
// host plane refuses it rather than read the guest's kernel views (here the host's own, the
// root of this test being "/").
func TestKernelFilesystemsAreRefused(t *testing.T) {
	r := &Root{id: "test", openRoot: func() (int, error) {
		return unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}}
	ctx := context.Background()
	for _, p := range []string{"/proc/1/status", "/sys/kernel/uevent_seqnum"} {
		var nc *sandbox.NotConfinedError
		if _, err := r.Read(ctx, p, "/", 1<<20); !errors.As(err, &nc) || !strings.Contains(err.Error(), "fs") {
			t.Errorf("read %s = %v, want NotConfinedError naming the kernel filesystem", p, err)
		}
		if _, err := r.Stat(ctx, p, "/"); !errors.As(err, &nc) {
			t.Errorf("stat %s = %v, want NotConfinedError", p, err)
		}
	}
	if err := r.Write(ctx, "/proc/sys/kernel/hostname", "/", []byte("x"), Owner{}); err == nil {
		t.Error("a write into procfs went through")
	}
}

// TestWriteOwnerAndMode: what a write makes is the owner's, mode 0644, whatever the umask,
// and whether or not the create already gave it that owner (a set-group-ID directory gives
// the directory's group, which the write must still replace).
func TestWriteOwnerAndMode(t *testing.T) {
	dockertest.RequireRoot(t)
	r, dir := dirRoot(t)
	if err := os.MkdirAll(filepath.Join(dir, "w/sgid"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "w/sgid"), 0, 4242); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(filepath.Join(dir, "w/sgid"), 0o2777); err != nil { // os.Chmod would take 0o2000 for no bit
		t.Fatal(err)
	}
	defer unix.Umask(unix.Umask(0o077))
	for _, tc := range []struct {
		path  string
		owner Owner
	}{
		{"root", Owner{}},
		{"guest", Owner{UID: 1000, GID: 1001}},
		{"sgid/root", Owner{}},
		{"sgid/guest", Owner{UID: 1000, GID: 1001}},
	} {
		for range 2 { // a fresh name, then over it
			if err := r.Write(context.Background(), tc.path, "/w", []byte("x"), tc.owner); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Lstat(filepath.Join(dir, "w", tc.path), &st); err != nil {
				t.Fatal(err)
			}
			if int(st.Uid) != tc.owner.UID || int(st.Gid) != tc.owner.GID || st.Mode&0o7777 != 0o644 {
				t.Errorf("%s: owned %d:%d mode %o, want %d:%d 644", tc.path, st.Uid, st.Gid, st.Mode&0o7777, tc.owner.UID, tc.owner.GID)
			}
		}
	}
}

// TestWriteReplacesWhatIsAtTheName: a link at the target, dangling or to a host file, is
// refused by the walk (one swapped in after it is replaced by the rename or refused by the
// link, TestSwapRaceNeverEscapes) and its target untouched; a directory there is refused; an
// absent name is made whole (through an unnamed file on this ext4), leaving no temporary.
func TestWriteReplacesWhatIsAtTheName(t *testing.T) {
	r, dir := dirRoot(t)
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(dir, "w")
	if err := os.MkdirAll(filepath.Join(w, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"link": outside, "dangling": "/nonexistent/x"} {
		if err := os.Symlink(to, filepath.Join(w, name)); err != nil {
			t.Fatal(err)
		}
		var nc *sandbox.NotConfinedError
		if err := r.Write(ctx, name, "/w", []byte("new"), Owner{}); !errors.As(err, &nc) {
			t.Fatalf("write over %s: %v, want NotConfinedError", name, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "host" {
		t.Fatalf("the link's target now holds %q", b)
	}
	var pe *sandbox.PathError
	if err := r.Write(ctx, "d", "/w", []byte("x"), Owner{}); !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrIsDirectory) {
		t.Fatalf("write over a directory: %v, want ErrIsDirectory", err)
	}
	if err := r.Write(ctx, "fresh", "/w", []byte("whole"), Owner{}); err != nil {
		t.Fatal(err)
	}
	names, _ := os.ReadDir(w)
	for _, e := range names {
		if strings.HasPrefix(e.Name(), stagingPrefix) {
			t.Errorf("a temporary name is left: %s", e.Name())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w, "fresh")); string(b) != "whole" {
		t.Fatalf("fresh holds %q", b)
	}
}

// TestUnnamedWriteNeverReplaces: when something appears at an absent target between the walk
// and the link (here made before the call), the unnamed write hands over to the named one
// and leaves what is there, link or file, as it was.
func TestUnnamedWriteNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("guest"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	pfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	for _, name := range []string{"f", "l"} {
		if err := writeUnnamed(pfd, name, []byte("host"), Owner{}); !errors.Is(err, errNamedWrite) {
			t.Fatalf("unnamed write over %s: %v, want errNamedWrite", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "guest" {
		t.Fatalf("f holds %q", b)
	}
	if to, _ := os.Readlink(filepath.Join(dir, "l")); to != "/etc/passwd" {
		t.Fatalf("l points to %q", to)
	}
	if err := writeUnnamed(pfd, "n", []byte("host"), Owner{}); err != nil {
		t.Fatalf("unnamed write of an absent name on %s: %v", dir, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "n")); string(b) != "host" {
		t.Fatalf("n holds %q", b)
	}
}

// TestMakeBase: the storage base is made as the archive plane's archive makes it, the base
// the guest's and its ancestors root's, and a link or file on the way is refused.
func TestMakeBase(t *testing.T) {
	dockertest.RequireRoot(t)
	r, dir := dirRoot(t)
	ctx := context.Background()
	if err := r.MakeBase(ctx, "/maf/work", Owner{UID: 1000, GID: 1001}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][2]uint32{"maf": {0, 0}, "maf/work": {1000, 1001}} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != want[0] || st.Gid != want[1] || st.Mode&0o7777 != 0o755 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			t.Errorf("%s: %d:%d mode %o, want a directory %d:%d 755", p, st.Uid, st.Gid, st.Mode, want[0], want[1])
		}
	}
	if err := r.MakeBase(ctx, "/maf/work", Owner{UID: 1000, GID: 1001}); err != nil {
		t.Fatalf("again: %v", err)
	}
	if err := os.Symlink("/", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var nc *sandbox.NotConfinedError
	if err := r.MakeBase(ctx, "/link/work", Owner{}); !errors.As(err, &nc) {
		t.Fatalf("base below a link: %v, want NotConfinedError", err)
	}
	var nd *sandbox.NotDirectoryError
	if err := r.MakeBase(ctx, "/file/work", Owner{}); !errors.As(err, &nd) {
		t.Fatalf("base below a file: %v, want NotDirectoryError", err)
	}
}
