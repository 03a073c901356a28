package observation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	text := "22 21 0:20 / / rw,relatime - overlay overlay rw\n" +
		"23 22 0:21 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k\n" +
		"24 23 0:22 / /dev/shm rw,nosuid shared:3 - tmpfs shm rw\n" +
		"25 22 8:1 /var/lib/docker/containers/abc/hosts /etc/hosts rw - ext4 /dev/vda rw\n" +
		"26 22 0:23 / /proc ro - proc proc rw\n" +
		"27 22 0:24 / /with\\040space rw - tmpfs tmpfs rw\n"
	ms, err := ParseMountInfo(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 6 {
		t.Fatalf("%d mounts, want 6", len(ms))
	}
	cases := []struct {
		i        int
		want     Mount
		measured bool
	}{
		{0, Mount{Path: "/", Root: "/", FSType: "overlay", Source: "overlay", Writable: true}, false},
		{1, Mount{Path: "/dev", Root: "/", FSType: "tmpfs", Source: "tmpfs", Writable: true}, true},
		{2, Mount{Path: "/dev/shm", Root: "/", FSType: "tmpfs", Source: "shm", Writable: true}, true},
		{3, Mount{Path: "/etc/hosts", Root: "/var/lib/docker/containers/abc/hosts", FSType: "ext4", Source: "/dev/vda", Writable: true}, true},
		{4, Mount{Path: "/proc", Root: "/", FSType: "proc", Source: "proc", Writable: false}, false},
		{5, Mount{Path: "/with space", Root: "/", FSType: "tmpfs", Source: "tmpfs", Writable: true}, true},
	}
	for _, tc := range cases {
		if ms[tc.i] != tc.want || ms[tc.i].Measured() != tc.measured {
			t.Fatalf("mount %d: %+v (measured %v), want %+v (measured %v)", tc.i, ms[tc.i], ms[tc.i].Measured(), tc.want, tc.measured)
		}
	}
	if _, err := ParseMountInfo("1 2 3\n"); err == nil {
		t.Fatal("a short line parsed")
	}
}

// fakeProc lays out a procfs-like tree: pid 1 with a root and a mount table, and more
// processes. The mounts are of the test's own filesystem, declared as the types given.
func fakeProc(t *testing.T, mountinfo string, files map[string]string) string {
	t.Helper()
	proc := t.TempDir()
	for name, content := range map[string]string{
		"1/stat": "1 (sleep) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1234 1 1 1\n", "1/cmdline": "sleep\x00infinity\x00",
		"7/stat": "7 (odd ) name) S 1 7 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5678 1 1 1\n", "7/cmdline": "sleep\x001000\x00",
		"99/stat": "99 (observer) R 0 99 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9999 1 1 1\n", "99/cmdline": "",
		"1/mountinfo": mountinfo,
	} {
		write(t, filepath.Join(proc, name), content)
	}
	for name, content := range files {
		write(t, filepath.Join(proc, "1", "root", name), content)
	}
	return proc
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const fakeMounts = "1 0 0:1 / / rw - overlay overlay rw\n" +
	"2 1 0:2 / /dev rw - tmpfs tmpfs rw\n" +
	"3 2 0:3 / /dev/shm rw - tmpfs shm rw\n" +
	"4 1 0:4 /c/abc/hosts /etc/hosts rw - ext4 /dev/vda rw\n" +
	"5 1 0:5 / /proc rw - proc proc rw\n"

func TestMeasure(t *testing.T) {
	proc := fakeProc(t, fakeMounts, map[string]string{
		"dev/null": "", "dev/shm/left": "residue", "etc/hosts": "127.0.0.1 localhost\n", "etc/passwd": "root\n",
		"proc/whatever": "kernel state",
	})
	r, err := Measure(proc, 99, Limits{MaxBytes: 1 << 20, MaxEntries: 100, MaxRootEntries: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range r.Processes {
		ids = append(ids, p.Identity())
	}
	if want := []string{"1:1234 sleep [sleep infinity]", "7:5678 odd ) name [sleep 1000]"}; !slices.Equal(ids, want) {
		t.Fatalf("processes %q, want %q (the observer left out)", ids, want)
	}
	var paths []string
	for p := range r.Entries {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	// /dev/shm is a mount of its own: measured as its own root, not as a child of /dev. The
	// root filesystem (/etc/passwd) and /proc are not the observer's to read.
	if want := []string{"/dev", "/dev/null", "/dev/shm", "/dev/shm/left", "/etc/hosts"}; !slices.Equal(paths, want) {
		t.Fatalf("entries %q, want %q", paths, want)
	}
	if want := []string{"/dev/shm/left"}; !slices.Equal(r.TmpfsEntries, want) {
		t.Fatalf("tmpfs entries %q, want %q (/dev/null is the engine's)", r.TmpfsEntries, want)
	}
	// The root filesystem is stat'ed but for every mount point and all beneath it.
	var rootPaths []string
	for p := range r.RootEntries {
		rootPaths = append(rootPaths, p)
	}
	slices.Sort(rootPaths)
	if want := []string{"/", "/etc", "/etc/passwd"}; !slices.Equal(rootPaths, want) {
		t.Fatalf("root entries %q, want %q", rootPaths, want)
	}
	if e := r.RootEntries["/etc/passwd"]; e.SHA256 != "" || e.Size != 5 || e.CtimeNs == 0 || e.Ino == 0 {
		t.Fatalf("root entry %+v, want its stat with a ctime and no digest", e)
	}
	sum := sha256.Sum256([]byte("127.0.0.1 localhost\n"))
	if e := r.Entries["/etc/hosts"]; e.SHA256 != hex.EncodeToString(sum[:]) || e.Size != 20 || e.CtimeNs == 0 {
		t.Fatalf("hosts entry %+v, want its digest, size and ctime", e)
	}
}

func TestMeasureRefuses(t *testing.T) {
	files := map[string]string{"dev/shm/a": strings.Repeat("x", 100), "dev/shm/b": "y"}
	cases := []struct {
		name    string
		mounts  string
		limits  Limits
		wantErr error
	}{
		{"the byte bound", fakeMounts, Limits{MaxBytes: 50, MaxEntries: 100, MaxRootEntries: 100}, ErrLimit},
		{"the entry bound", fakeMounts, Limits{MaxBytes: 1 << 20, MaxEntries: 2, MaxRootEntries: 100}, ErrLimit},
		{"the root entry bound", strings.Replace(fakeMounts, "4 1 0:4 /c/abc/hosts /etc/hosts rw - ext4 /dev/vda rw\n", "", 1), Limits{MaxBytes: 1 << 20, MaxEntries: 100, MaxRootEntries: 2}, ErrLimit},
		{"a writable directory mount that is not tmpfs", fakeMounts + "6 1 0:6 /vol /data rw - ext4 /dev/vdb rw\n",
			Limits{MaxBytes: 1 << 20, MaxEntries: 100, MaxRootEntries: 100}, ErrUnobservable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := map[string]string{"data/x": "volume"}
			for k, v := range files {
				f[k] = v
			}
			_, err := Measure(fakeProc(t, tc.mounts, f), 99, tc.limits)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
			if ExitCode(err) == ExitUnreadable {
				t.Fatalf("exit code of %v is the generic one", err)
			}
		})
	}
	if _, err := Measure(t.TempDir(), 99, Limits{MaxBytes: 1, MaxEntries: 1, MaxRootEntries: 1}); err == nil || ExitCode(err) != ExitUnreadable {
		t.Fatalf("an unreadable proc gave %v", err)
	}
}

func TestSameRootEntry(t *testing.T) {
	file := Entry{Dev: 1, Ino: 2, Mode: 0o100644, Nlink: 1, Size: 5, MtimeNs: 10, CtimeNs: 10}
	dir := Entry{Dev: 1, Ino: 3, Mode: 0o040755, Nlink: 2, Size: 4096, MtimeNs: 10, CtimeNs: 10}
	with := func(e Entry, f func(*Entry)) Entry { f(&e); return e }
	cases := []struct {
		name string
		a, b Entry
		want bool
	}{
		{"the same file", file, file, true},
		{"a file rewritten with its size and mtime put back", file, with(file, func(e *Entry) { e.CtimeNs = 20 }), false},
		{"a file replaced", file, with(file, func(e *Entry) { e.Ino = 9 }), false},
		{"a chmod", file, with(file, func(e *Entry) { e.Mode = 0o100600 }), false},
		{"a directory whose child came and went", dir, with(dir, func(e *Entry) { e.MtimeNs, e.CtimeNs, e.Nlink = 20, 20, 3 }), true},
		{"a directory chmod", dir, with(dir, func(e *Entry) { e.Mode = 0o040700 }), false},
		{"a directory chown", dir, with(dir, func(e *Entry) { e.UID = 1000 }), false},
		{"a directory replaced by a file", dir, with(file, func(e *Entry) { e.Ino = dir.Ino }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameRootEntry(tc.a, tc.b); got != tc.want {
				t.Fatalf("SameRootEntry = %v, want %v", got, tc.want)
			}
		})
	}
}
