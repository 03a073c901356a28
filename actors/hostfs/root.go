package hostfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Root is one container instance's filesystem as its init process sees it. Its methods take
// guest paths already confined by the caller's string checks (sandbox/paths) and may be
// called from any goroutine; each opens the root afresh through the held process handle.
type Root struct {
	id       string
	pid      int
	proc     *os.File            // /proc/<pid>, O_PATH; nil for a test root
	openRoot func() (int, error) // a fresh O_PATH handle on the root
}

// ID and Pid name the instance and process the root was proven for.
func (r *Root) ID() string { return r.id }

// Pid is the host pid of the container's init process.
func (r *Root) Pid() int { return r.pid }

// Close releases the process handle.
func (r *Root) Close() error {
	if r.proc == nil {
		return nil
	}
	return r.proc.Close()
}

// Alive reports whether the proven process still runs.
func (r *Root) Alive() bool {
	fd, err := r.openRoot()
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

// resolveFlags make the kernel refuse any link, magic or not, at any component, and any
// escape above the handle the lookup starts from.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openat2 opens rel beneath dirfd with resolveFlags; EAGAIN (a rename raced the lookup) and
// EINTR are retried a few times.
func openat2(dirfd int, rel string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: resolveFlags}
	for range 8 {
		fd, err := unix.Openat2(dirfd, rel, how)
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// rel is abs relative to the root handle: "." for "/".
func rel(abs string) string {
	r := strings.TrimLeft(paths.Normalize(abs), "/")
	if r == "" {
		return "."
	}
	return r
}

// call is one operation's view of the root: a handle opened for it, the caller's path and
// working directory for messages.
type call struct {
	root      int
	shown, wd string
}

func (r *Root) begin(shown, wd string) (*call, error) {
	fd, err := r.openRoot()
	if err != nil {
		return nil, err
	}
	return &call{root: fd, shown: shown, wd: wd}, nil
}

func (c *call) close() { _ = unix.Close(c.root) }

// dir opens the directory abs (O_PATH) beneath the root. A link at any component is the
// confinement refusal, a non-directory the ENOTDIR one, and absence fs.ErrNotExist wrapped.
func (c *call) dir(abs string) (int, error) {
	fd, err := openat2(c.root, rel(abs), unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, c.resolveErr(abs, err)
	}
	if err := refuseKernelFS(fd, abs); err != nil {
		_ = unix.Close(fd)
		return -1, &sandbox.NotConfinedError{Path: c.shown, WorkDir: c.wd, Reason: err.Error()}
	}
	return fd, nil
}

// resolveErr maps a failed lookup of abs to the protocol's refusals.
func (c *call) resolveErr(abs string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return &sandbox.NotConfinedError{Path: c.shown, WorkDir: c.wd,
			Reason: fmt.Sprintf("a component of %s is a link, not a real directory, so a path through it does not stay inside the working directory", abs)}
	case errors.Is(err, unix.ENOTDIR):
		return &sandbox.NotDirectoryError{Path: abs}
	case errors.Is(err, unix.ENOENT):
		return &os.PathError{Op: "open", Path: abs, Err: os.ErrNotExist}
	}
	return fmt.Errorf("hostfs: open %s: %w", abs, err)
}

// entry describes abs without following it: nil when absent.
func (c *call) entry(abs string) (*unix.Stat_t, error) {
	if paths.Normalize(abs) == "/" {
		var st unix.Stat_t
		if err := unix.Fstat(c.root, &st); err != nil {
			return nil, err
		}
		return &st, nil
	}
	pfd, err := c.dir(path.Dir(abs))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	err = unix.Fstatat(pfd, path.Base(abs), &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hostfs: stat %s: %w", abs, err)
	}
	return &st, nil
}

// stat is the walk's [paths.StatFunc]: unconfined (the working directory's own ancestors are
// walked too), no-follow, answered by the kernel.
func (c *call) stat(_ context.Context, abs string) (*sandbox.FileStat, error) {
	st, err := c.entry(abs)
	if err != nil || st == nil {
		return nil, err
	}
	return fileStat(abs, st), nil
}

func fileStat(p string, st *unix.Stat_t) *sandbox.FileStat {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return sandbox.NewFileStat(p, sandbox.EntryFile, st.Size)
	case unix.S_IFDIR:
		return sandbox.NewFileStat(p, sandbox.EntryDirectory, 0)
	case unix.S_IFLNK:
		return sandbox.NewFileStat(p, sandbox.EntrySymlink, 0)
	}
	return sandbox.NewFileStat(p, sandbox.EntryOther, 0)
}

// kernelFS are the filesystems of /proc, /sys and their kin: outside the protocol's contract,
// and the guest's own (a procfs of its pid namespace) would show the host's engine nothing
// it owns. devtmpfs and the /dev tmpfs are not among them: their devices are never opened.
var kernelFS = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "procfs",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroupfs",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.DEVPTS_SUPER_MAGIC:  "devpts",
	unix.BPF_FS_MAGIC:        "bpffs",
}

func refuseKernelFS(fd int, abs string) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("statfs %s: %v", abs, err)
	}
	if name, ok := kernelFS[int64(fs.Type)]; ok {
		return fmt.Errorf("%s is on the guest's %s, which the host file plane does not reach", abs, name)
	}
	return nil
}
