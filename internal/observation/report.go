// Package observation is the measurement the fingerprint observer makes (docker-backend §12.5):
// run in a container of its own joined to a workload's PID namespace, it reads the workload's
// processes and mounted files through /proc, never through anything the workload ships, and
// writes one [Report] as JSON. cmd/observer is its program; package docker/fingerprint runs it
// and compares its reports.
//
// What it reads: every process of the namespace but itself ([Process]: pid, start time in
// clock ticks since boot, comm, cmdline), the workload's mount table (/proc/1/mountinfo), and
// every entry beneath each writable mount that is not the root filesystem, kernel state
// (proc, sysfs, devpts, mqueue, cgroup, anything under /proc or /sys) or beneath another
// mount: its metadata without the access time, and a regular file's SHA-256 or a link's
// target. A writable directory mount that is not tmpfs is refused: it may be shared with the
// host or another container, so what it holds is not this sandbox's state to measure.
//
// The root filesystem is walked too, every entry that is not beneath another mount
// ([Report.RootEntries]), but stat'ed only, not read: its metadata without the access time
// and a link's target. The ctime is what makes that enough: the kernel sets it to the current
// time on every write, chmod, chown, link count or extended attribute change, and no call
// sets it back (utimensat sets the mtime, never the ctime), so a file whose content changed
// and whose size and mtime were put back still differs. The engine's change list cannot be
// relied on for that: Docker's naive differ, which every storage driver but overlay2 uses,
// compares size and mtime alone.
//
// Consistency: each mounted entry is stat'ed before, during (fstat of the open file) and
// after its read, ctime included, each root directory is listed through the descriptor whose
// stat was recorded, and the mount table and process list are read again at the end; any
// difference fails the measurement rather than report a torn state.
package observation

import (
	"errors"
	"fmt"
	"strings"
)

// Version is the report format written by this package's [Measure].
const Version = 2

// Exit codes of the observer program, one per error class, so that its runner tells them
// apart without reading text. Any other failure exits 1.
const (
	ExitUnreadable   = 1
	ExitUsage        = 2
	ExitLimit        = 3
	ExitChanged      = 4
	ExitUnobservable = 5
)

// Error classes of a measurement.
var (
	// ErrUsage is the observer program called with arguments it does not take.
	ErrUsage = errors.New("usage")
	// ErrLimit is a measurement that went over one of its [Limits].
	ErrLimit = errors.New("observation: measurement bound exceeded")
	// ErrChanged is a measurement that saw its subject change while it read.
	ErrChanged = errors.New("observation: changed during the observation")
	// ErrUnobservable is a writable mount the observer refuses to measure.
	ErrUnobservable = errors.New("observation: unobservable writable mount")
)

// ExitCode is the observer's exit code for err.
func ExitCode(err error) int {
	switch {
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrLimit):
		return ExitLimit
	case errors.Is(err, ErrChanged):
		return ExitChanged
	case errors.Is(err, ErrUnobservable):
		return ExitUnobservable
	}
	return ExitUnreadable
}

// Report is one observation of one workload.
type Report struct {
	Version   int              `json:"version"`
	Processes []Process        `json:"processes"`
	Mounts    []Mount          `json:"mounts"`
	Entries   map[string]Entry `json:"entries"`
	// TmpfsEntries are the entries on a tmpfs below its mount point, except the engine's own
	// device nodes in /dev: a fresh container has none, so any is something a call made.
	TmpfsEntries []string `json:"tmpfs_entries"`
	// RootEntries are the root filesystem's entries that are not beneath another mount, by
	// path, stat'ed only: no SHA256 (a link keeps its target).
	RootEntries map[string]Entry `json:"root_entries"`
}

// Process is one process's birth identity: a pid is reused, a pid with its start time is not.
type Process struct {
	PID       int      `json:"pid"`
	StartTime uint64   `json:"start_time"` // field 22 of /proc/<pid>/stat, clock ticks after boot
	Comm      string   `json:"comm"`
	Cmdline   []string `json:"cmdline"`
}

// Identity is the process's identity as the fingerprint compares it: pid and start time, then
// the program as the kernel names it, so an exec in place also shows.
func (p Process) Identity() string {
	return fmt.Sprintf("%d:%d %s [%s]", p.PID, p.StartTime, p.Comm, strings.Join(p.Cmdline, " "))
}

// Mount is one line of the workload's mountinfo.
type Mount struct {
	Path     string `json:"path"`   // mount point in the workload
	Root     string `json:"root"`   // the mounted directory or file within its filesystem
	FSType   string `json:"fstype"` // e.g. overlay, tmpfs, proc
	Source   string `json:"source"`
	Writable bool   `json:"writable"` // the mount's own options say rw
}

// Entry is one measured file, directory, link or node.
type Entry struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Mode    uint32 `json:"mode"`
	Nlink   uint64 `json:"nlink"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Rdev    uint64 `json:"rdev"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
	SHA256  string `json:"sha256,omitempty"` // regular files
	Link    string `json:"link,omitempty"`   // symbolic links
}

// SameRootEntry reports whether the root filesystem entry a, of the baseline, is b: for a
// file, link or node, every field (a write, a chmod, a rename over it or a put-back mtime all
// change its inode or ctime); for two directories, the type, mode, owner and group alone,
// since making and removing a child changes a directory's size, link count, mtime and ctime,
// and each child is an entry of its own.
func SameRootEntry(a, b Entry) bool {
	const typ = 0o170000
	if a.Mode&typ == 0o040000 && b.Mode&typ == 0o040000 {
		return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID
	}
	return a == b
}

// WithoutCtime is e with its ctime cleared, for the comparisons that must ignore it.
func (e Entry) WithoutCtime() Entry {
	e.CtimeNs = 0
	return e
}

// Limits bound one measurement; exceeding any fails it.
type Limits struct {
	MaxBytes       int64 // regular-file bytes hashed, all files together
	MaxEntries     int   // entries of the measured mounts recorded
	MaxRootEntries int   // entries of the root filesystem recorded
}

// Default limits: the first two are those of the reference subject; the root filesystem's
// bound leaves room for a large language runtime (the test Python image has about 5 500).
const (
	DefaultMaxBytes       = 64 << 20
	DefaultMaxEntries     = 10000
	DefaultMaxRootEntries = 100000
)

// DefaultLimits are the three default bounds.
func DefaultLimits() Limits {
	return Limits{MaxBytes: DefaultMaxBytes, MaxEntries: DefaultMaxEntries, MaxRootEntries: DefaultMaxRootEntries}
}

// kernelFS are filesystem types that expose kernel state, outside the fingerprint's contract.
var kernelFS = map[string]bool{
	"proc": true, "sysfs": true, "devpts": true, "mqueue": true, "cgroup": true, "cgroup2": true,
	"securityfs": true, "debugfs": true, "tracefs": true, "bpf": true, "fusectl": true,
}

// engineDevices are what the engine puts in a container's /dev tmpfs.
var engineDevices = map[string]bool{
	"/dev/console": true, "/dev/core": true, "/dev/fd": true, "/dev/full": true, "/dev/null": true,
	"/dev/ptmx": true, "/dev/random": true, "/dev/stderr": true, "/dev/stdin": true,
	"/dev/stdout": true, "/dev/tty": true, "/dev/urandom": true, "/dev/zero": true,
}

// Measured reports whether the entries beneath m are measured: a writable mount other than the
// root filesystem that is not kernel state.
func (m Mount) Measured() bool {
	if m.Path == "/" || !m.Writable || kernelFS[m.FSType] {
		return false
	}
	for _, k := range []string{"/proc", "/sys"} {
		if m.Path == k || strings.HasPrefix(m.Path, k+"/") {
			return false
		}
	}
	return true
}

// ParseMountInfo reads /proc/<pid>/mountinfo text (proc(5)).
func ParseMountInfo(text string) ([]Mount, error) {
	var out []Mount
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("unreadable mountinfo line %q", line)
		}
		writable := false
		for _, o := range strings.Split(f[5], ",") {
			if o == "rw" {
				writable = true
			}
		}
		out = append(out, Mount{Path: unescape(f[4]), Root: unescape(f[3]), FSType: f[sep+1],
			Source: unescape(f[sep+2]), Writable: writable})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
