package hostfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Stat describes p under the absolute working directory wd without following it (protocol
// §4.3): nil when absent; Path relative to wd.
func (r *Root) Stat(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	c, err := r.begin(p, wd)
	if err != nil {
		return nil, err
	}
	defer c.close()
	abs, err := paths.ResolveRead(ctx, c.stat, p, wd)
	if err != nil {
		return nil, err
	}
	st, err := c.stat(ctx, abs)
	if st != nil {
		st.Path, _ = paths.RelativeTo(abs, paths.Normalize(wd))
	}
	return st, err
}

// Read returns the bytes of the regular file p, refused above maxBytes before any byte is
// read. The entry is opened O_PATH first and described; only a regular file is reopened for
// reading, through that same handle, so a FIFO, device or socket is never opened and a swap
// after the check reopens nothing else.
func (r *Root) Read(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	c, err := r.begin(p, wd)
	if err != nil {
		return nil, err
	}
	defer c.close()
	abs, err := paths.ResolveRead(ctx, c.stat, p, wd)
	if err != nil {
		return nil, err
	}
	pfd, err := c.dir(path.Dir(abs))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	// O_PATH|O_NOFOLLOW hands back the entry itself even when it is a link.
	opath, err := openat2(pfd, path.Base(abs), unix.O_PATH|unix.O_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, c.resolveErr(abs, err)
	}
	defer unix.Close(opath)
	var st unix.Stat_t
	if err := unix.Fstat(opath, &st); err != nil {
		return nil, fmt.Errorf("hostfs: stat %s: %w", abs, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: sandbox.ErrIsDirectory}
	default:
		return nil, &sandbox.NotRegularError{Path: p, Kind: fileStat("", &st).Kind}
	}
	if st.Size > maxBytes {
		return nil, &sandbox.TransferCapExceededError{Path: p, Cap: "max bytes", Limit: maxBytes, Actual: st.Size}
	}
	if err := refuseKernelFS(opath, abs); err != nil {
		return nil, &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: err.Error()}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(opath), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("hostfs: reopen %s for reading: %w", abs, err)
	}
	f := os.NewFile(uintptr(fd), abs)
	defer f.Close()
	// The file may grow after the check: read one byte past the cap to know.
	body, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("hostfs: read %s: %w", abs, err)
	}
	if int64(len(body)) > maxBytes {
		return nil, &sandbox.TransferCapExceededError{Path: p, Cap: "max bytes", Limit: maxBytes, Actual: int64(len(body))}
	}
	return body, nil
}

// Owner is the identity a write stamps on what it creates.
type Owner struct{ UID, GID int }

// stagingPrefix begins a write's temporary name, as on the archive plane: a dot file of a
// fixed form, so a leftover (an engine killed mid-write) can be recognised.
const stagingPrefix = ".maf-write-"

// Write puts content at p atomically (protocol §4.5): the missing directories below wd are
// created 0755 as owner (those above it root's, as the daemon makes them), and the file, owned
// by owner, mode 0644, gets its bytes before it gets the target's name in that same directory
// handle: linked there from an unnamed file when the name is absent and the filesystem has
// them (writeUnnamed), else renamed over it from a temporary name (writeNamed). A reader never
// sees a torn file, an engine killed mid-write leaves the old content, and a link the guest
// swaps in at the target after the check is replaced, never followed.
func (r *Root) Write(ctx context.Context, p, wd string, content []byte, owner Owner) error {
	c, err := r.begin(p, wd)
	if err != nil {
		return err
	}
	defer c.close()
	// The walk's last stat is of the target: whether it was absent picks the way to write.
	var last struct {
		abs    string
		absent bool
	}
	walk := func(ctx context.Context, a string) (*sandbox.FileStat, error) {
		st, err := c.stat(ctx, a)
		last.abs, last.absent = a, err == nil && st == nil
		return st, err
	}
	abs, err := paths.ResolveWrite(ctx, walk, p, wd)
	if err != nil {
		return err
	}
	pfd, err := c.mkdirs(path.Dir(abs), owner)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
		// A directory made or opened on the way was removed meanwhile (a guest racing its
		// own tree): as if the write had come after the removal.
		return &sandbox.PathError{Op: "write", Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	name := path.Base(abs)
	err = errNamedWrite
	if last.abs == abs && last.absent {
		err = writeUnnamed(pfd, name, content, owner)
	}
	if errors.Is(err, errNamedWrite) {
		err = writeNamed(pfd, name, content, owner)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EISDIR), errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return &sandbox.PathError{Op: "write", Path: p, Err: sandbox.ErrIsDirectory}
	case errors.Is(err, unix.ENOENT):
		// The directory was removed since it was opened (a guest racing its own tree).
		return &sandbox.PathError{Op: "write", Path: p, Err: fs.ErrNotExist}
	}
	return fmt.Errorf("hostfs: write %s: %w", abs, err)
}

// errNamedWrite sends a write to the temporary name.
var errNamedWrite = errors.New("hostfs: write through a temporary name")

// writeUnnamed makes name, absent at the walk, by linking an unnamed file (O_TMPFILE) at it
// once its owner, mode and bytes are set: the name appears whole or not at all, and a writer
// killed before the link leaves nothing behind. errNamedWrite when something appeared at the
// name meanwhile (linkat cannot replace it) or the filesystem has no unnamed files
// (fuse-overlayfs answers EOPNOTSUPP without a round trip to its daemon).
func writeUnnamed(pfd int, name string, content []byte, owner Owner) error {
	fd, err := unix.Openat(pfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return errNamedWrite
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if err := settle(fd, owner); err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		return err
	}
	// linkat never follows or replaces what is at name: EEXIST if the guest made something
	// there since the walk, and the named write then replaces it.
	err = unix.Linkat(fd, "", pfd, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EEXIST) {
		return errNamedWrite
	}
	return err
}

// writeNamed writes content to a fresh temporary name in the directory, owned by owner, mode
// 0644, and renames it over name: a reader sees the old file or the new, and a link at name is
// replaced, never followed. A writer killed before the rename leaves the temporary name.
func writeNamed(pfd int, name string, content []byte, owner Owner) error {
	tmp := stagingPrefix + token()
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = func() error {
		defer f.Close()
		if err := settle(fd, owner); err != nil {
			return err
		}
		_, err := f.Write(content)
		return err
	}()
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
	}
	return err
}

// settle gives the file just created at fd the owner and mode 0644, before any byte is
// written. Each is set only when the new inode lacks it: on fuse-overlayfs every fchown and
// fchmod is a round trip to the FUSE daemon (about 90 and 30 µs here), while the fstat is
// answered from the attributes the create returned. The umask does not apply to what the
// archive plane makes, hence the mode (a chown clears only set-id bits, which 0644 lacks).
func settle(fd int, owner Owner) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != owner.UID || int(st.Gid) != owner.GID {
		if err := unix.Fchown(fd, owner.UID, owner.GID); err != nil {
			return err
		}
	}
	if st.Mode&0o7777 != 0o644 {
		return unix.Fchmod(fd, 0o644)
	}
	return nil
}

// MakeBase makes the directory base and its missing ancestors, as the archive plane's
// storage-base archive does: base 0755 owned by owner, the ancestors 0755 root's. What exists
// is kept; a link at any component is the confinement refusal and another non-directory the
// ENOTDIR one, with no window for a guest to swap one in (each is made with mkdirat in its
// parent's handle and reopened no-follow).
func (r *Root) MakeBase(ctx context.Context, base string, owner Owner) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := r.begin(base, base)
	if err != nil {
		return err
	}
	defer c.close()
	fd, err := c.mkdirs(paths.Normalize(base), owner)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// mkdirs opens dir, creating what is missing: inside wd as owner, above it as root. Each is
// made with mkdirat in its parent's handle and opened no-follow, so a link planted at a name
// just made is refused rather than entered.
func (c *call) mkdirs(dir string, owner Owner) (int, error) {
	fd, err := c.dir(dir)
	if !errors.Is(err, os.ErrNotExist) {
		return fd, err
	}
	parent, err := c.mkdirs(path.Dir(dir), owner)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	uid, gid := 0, 0
	if _, inside := paths.RelativeTo(dir, paths.Normalize(c.wd)); inside {
		uid, gid = owner.UID, owner.GID
	}
	name := path.Base(dir)
	if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, fmt.Errorf("hostfs: make %s: %w", dir, err)
	} else if err == nil {
		if err := unix.Fchownat(parent, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, fmt.Errorf("hostfs: own %s: %w", dir, err)
		}
		_ = unix.Fchmodat(parent, name, 0o755, 0) // past the umask; a link swapped in meanwhile is refused below
	}
	fd, err = openat2(parent, name, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return -1, c.resolveErr(dir, err)
	}
	return fd, nil
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// List describes the entries of the directory p (protocol §4.8), no-follow, Paths relative
// to wd; a link at p itself is refused as on every other component.
func (r *Root) List(ctx context.Context, p, wd string) ([]sandbox.FileStat, error) {
	c, err := r.begin(p, wd)
	if err != nil {
		return nil, err
	}
	defer c.close()
	abs, err := paths.ResolveList(ctx, c.stat, p, wd)
	if err != nil {
		return nil, err
	}
	fd, err := openat2(c.root, rel(abs), unix.O_RDONLY|unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return nil, &sandbox.PathError{Op: "list", Path: p, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, c.resolveErr(abs, err)
	}
	if err := refuseKernelFS(fd, abs); err != nil {
		_ = unix.Close(fd)
		return nil, &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: err.Error()}
	}
	d := os.NewFile(uintptr(fd), abs)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("hostfs: list %s: %w", abs, err)
	}
	base := paths.Normalize(wd)
	out := make([]sandbox.FileStat, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the listing
		}
		relp, _ := paths.RelativeTo(paths.Join(abs, n), base)
		out = append(out, *fileStat(relp, &st))
	}
	return out, nil
}
