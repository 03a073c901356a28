package observation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Measure observes the workload whose init is pid 1 under procRoot ("/proc" in the observer's
// container), leaving out self, the observer's own pid. It fails with [ErrLimit],
// [ErrChanged], [ErrUnobservable], or the error of any read that did not succeed: nothing is
// skipped silently.
func Measure(procRoot string, self int, lim Limits) (Report, error) {
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 || lim.MaxRootEntries <= 0 {
		return Report{}, fmt.Errorf("observation: limits must be positive")
	}
	procs, err := processes(procRoot, self)
	if err != nil {
		return Report{}, err
	}
	infoPath := path.Join(procRoot, "1", "mountinfo")
	info, err := os.ReadFile(infoPath)
	if err != nil {
		return Report{}, fmt.Errorf("read the workload's mount table: %w", err)
	}
	mounts, err := ParseMountInfo(string(info))
	if err != nil {
		return Report{}, err
	}
	byPath := map[string]Mount{}
	for _, m := range mounts { // a later mount on the same path hides the earlier one
		byPath[m.Path] = m
	}
	var roots []string
	for p, m := range byPath {
		if m.Measured() {
			roots = append(roots, p)
		}
	}
	slices.Sort(roots)

	root, err := unix.Open(path.Join(procRoot, "1", "root"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Report{}, fmt.Errorf("open the workload's root: %w", err)
	}
	defer unix.Close(root)
	w := &walker{mounts: byPath, budget: lim.MaxBytes, maxEntries: lim.MaxEntries, entries: map[string]Entry{}}
	for _, p := range roots {
		if err := w.mountRoot(root, p); err != nil {
			return Report{}, err
		}
	}
	rw := &rootWalker{mounts: byPath, max: lim.MaxRootEntries, entries: map[string]Entry{}}
	if err := rw.dir(root, "/"); err != nil {
		return Report{}, err
	}

	again, err := os.ReadFile(infoPath)
	if err != nil {
		return Report{}, fmt.Errorf("read the workload's mount table again: %w", err)
	}
	procsAgain, err := processes(procRoot, self)
	if err != nil {
		return Report{}, err
	}
	if string(again) != string(info) {
		return Report{}, fmt.Errorf("%w: the mount table", ErrChanged)
	}
	if !slices.EqualFunc(procs, procsAgain, func(a, b Process) bool { return a.Identity() == b.Identity() }) {
		return Report{}, fmt.Errorf("%w: the process list", ErrChanged)
	}
	slices.Sort(w.tmpfs)
	if w.tmpfs == nil {
		w.tmpfs = []string{}
	}
	return Report{Version: Version, Processes: procs, Mounts: mounts, Entries: w.entries, TmpfsEntries: w.tmpfs,
		RootEntries: rw.entries}, nil
}

// processes lists every process under procRoot but self, by pid.
func processes(procRoot string, self int) ([]Process, error) {
	des, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Process
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		p, err := process(procRoot, pid)
		if errors.Is(err, os.ErrNotExist) {
			// Gone between the listing and the read: the second listing tells whether that
			// matters, since it will differ from the first.
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Process) int { return a.PID - b.PID })
	return out, nil
}

// process reads one process's birth identity.
func process(procRoot string, pid int) (Process, error) {
	dir := path.Join(procRoot, strconv.Itoa(pid))
	stat, err := os.ReadFile(path.Join(dir, "stat"))
	if err != nil {
		return Process{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	// comm may hold spaces and parentheses: it runs from the first "(" to the last ")".
	s := string(stat)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return Process{}, fmt.Errorf("unreadable stat of process %d", pid)
	}
	fields := strings.Fields(s[closing+1:])
	if len(fields) < 20 { // fields 3 … 22
		return Process{}, fmt.Errorf("unreadable stat of process %d: %d fields after the name", pid, len(fields))
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return Process{}, fmt.Errorf("unreadable start time of process %d: %w", pid, err)
	}
	raw, err := os.ReadFile(path.Join(dir, "cmdline"))
	if err != nil {
		return Process{}, fmt.Errorf("read the command line of process %d: %w", pid, err)
	}
	var argv []string
	if len(raw) > 0 {
		argv = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	}
	return Process{PID: pid, StartTime: start, Comm: s[open+1 : closing], Cmdline: argv}, nil
}

type walker struct {
	mounts     map[string]Mount
	budget     int64
	maxEntries int
	entries    map[string]Entry
	tmpfs      []string
}

// mountRoot measures the mount at p, opened component by component from root without
// following any link.
func (w *walker) mountRoot(root int, p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, part := range parts {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("unusable mount path %q", p)
		}
	}
	parent, err := unix.Dup(root)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer func() { unix.Close(parent) }()
	for _, part := range parts[:len(parts)-1] {
		child, err := unix.Openat(parent, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		unix.Close(parent)
		parent = child
	}
	name := parts[len(parts)-1]
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR && w.mounts[p].FSType != "tmpfs" {
		return fmt.Errorf("%w: %s (%s)", ErrUnobservable, p, w.mounts[p].FSType)
	}
	return w.record(parent, name, p, p)
}

func entryOf(st *unix.Stat_t) Entry {
	return Entry{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: st.Mode, Nlink: uint64(st.Nlink), UID: st.Uid,
		GID: st.Gid, Rdev: uint64(st.Rdev), Size: st.Size, MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}
}

// record measures the entry name in the directory parent, at path p on mount mnt, and
// everything beneath it that is not another mount.
func (w *walker) record(parent int, name, p, mnt string) error {
	if len(w.entries) >= w.maxEntries {
		return fmt.Errorf("%w: more than %d entries", ErrLimit, w.maxEntries)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	e := entryOf(&st)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(parent, name, buf)
		if err != nil {
			return fmt.Errorf("read link %s: %w", p, err)
		}
		e.Link = string(buf[:n])
	case unix.S_IFREG:
		sum, err := w.hash(parent, name, p, e)
		if err != nil {
			return err
		}
		e.SHA256 = sum
	case unix.S_IFDIR:
		if err := w.directory(parent, name, p, mnt, e); err != nil {
			return err
		}
	}
	var after unix.Stat_t
	if err := unix.Fstatat(parent, name, &after, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("stat %s again: %w", p, err)
	}
	if entryOf(&after) != entryOf(&st) {
		return fmt.Errorf("%w: %s", ErrChanged, p)
	}
	w.entries[p] = e
	if w.mounts[mnt].FSType == "tmpfs" && p != mnt && !(mnt == "/dev" && engineDevices[p]) {
		w.tmpfs = append(w.tmpfs, p)
	}
	return nil
}

// hash returns the SHA-256 of the regular file name, checking that the file opened is the
// one stat'ed.
func (w *walker) hash(parent int, name, p string, want Entry) (string, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("stat open %s: %w", p, err)
	}
	if entryOf(&st) != want {
		return "", fmt.Errorf("%w: %s", ErrChanged, p)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, w.budget+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if w.budget -= n; w.budget < 0 {
		return "", fmt.Errorf("%w: more file bytes than the byte bound", ErrLimit)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// directory measures every child of the directory name that is not a mount point itself.
func (w *walker) directory(parent int, name, p, mnt string, want Entry) error {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat open %s: %w", p, err)
	}
	if entryOf(&st) != want {
		return fmt.Errorf("%w: %s", ErrChanged, p)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	slices.Sort(names)
	for _, child := range names {
		cp := path.Join(p, child)
		if _, isMount := w.mounts[cp]; isMount {
			continue
		}
		if err := w.record(fd, child, cp, mnt); err != nil {
			return err
		}
	}
	return nil
}

// rootWalker stats the root filesystem: every entry that is not a mount point or beneath one.
type rootWalker struct {
	mounts  map[string]Mount
	max     int
	entries map[string]Entry
}

// dir records the open directory fd at p and every entry beneath it. The entry recorded for p
// is fd's own stat, so the listing is of the directory recorded.
func (r *rootWalker) dir(fd int, p string) error {
	if len(r.entries) >= r.max {
		return fmt.Errorf("%w: more than %d root filesystem entries", ErrLimit, r.max)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	r.entries[p] = entryOf(&st)
	dup, err := unix.Dup(fd)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(dup), p)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", p, err)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := r.child(fd, name, path.Join(p, name)); err != nil {
			return err
		}
	}
	return nil
}

// child records the entry name of the directory parent at p, and descends into it when it
// is a directory; a mount point is another mount's and is left out with all beneath it.
func (r *rootWalker) child(parent int, name, p string) error {
	if _, isMount := r.mounts[p]; isMount {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		defer unix.Close(fd)
		return r.dir(fd, p)
	case unix.S_IFLNK:
		e := entryOf(&st)
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(parent, name, buf)
		if err != nil {
			return fmt.Errorf("read link %s: %w", p, err)
		}
		e.Link = string(buf[:n])
		return r.add(p, e)
	}
	return r.add(p, entryOf(&st))
}

func (r *rootWalker) add(p string, e Entry) error {
	if len(r.entries) >= r.max {
		return fmt.Errorf("%w: more than %d root filesystem entries", ErrLimit, r.max)
	}
	r.entries[p] = e
	return nil
}
