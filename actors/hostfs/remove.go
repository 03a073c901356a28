package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Removal is one request to delete a guest path, already string-confined by the caller.
type Removal struct {
	Op        string // "remove" or "reclaim", for messages
	Shown     string // the path as the caller gave it
	Abs       string // the confined absolute guest path
	WorkDir   string // the resolved working directory the walk starts below
	Recursive bool
	Guest     Cred
}

// maxDepth bounds a recursive removal's descent (one open directory per level).
const maxDepth = 512

// Remove deletes r.Abs (protocol §4.7) under the reach rule (§6.5): the operation deletes
// nothing the guest itself could not. The walk from "/" to the parent runs with resolveFlags
// and records each component's owner; the unlink runs with root's authority only when every
// component is root's and writable by nobody else (the guest could swap none of them) and the
// operand is not a directory to empty; otherwise it runs with the guest's own file
// credentials (asGuest), so the kernel refuses whatever it would refuse the guest. Every
// lookup, at every depth of a recursive removal, is fd-relative under resolveFlags: a link the
// guest swaps in anywhere is unlinked as an entry or refused, never followed. Absent is
// success.
func (r *Root) Remove(ctx context.Context, m Removal) error {
	c, err := r.begin(m.Shown, m.WorkDir)
	if err != nil {
		return err
	}
	defer c.close()
	var owners []paths.Owner
	var rootSt unix.Stat_t
	if err := unix.Fstat(c.root, &rootSt); err != nil {
		return fmt.Errorf("hostfs: stat /: %w", err)
	}
	owners = append(owners, owner("/", &rootSt))
	walked := paths.Ancestors(path.Dir(m.Abs), m.WorkDir)
	record := func(ctx context.Context, abs string) (*sandbox.FileStat, error) {
		st, err := c.entry(abs)
		if err != nil || st == nil {
			return nil, err
		}
		owners = append(owners, owner(abs, st))
		return fileStat(abs, st), nil
	}
	if err := paths.RefuseSymlinkedAncestors(ctx, record, m.Abs, m.WorkDir, false); err != nil {
		return err
	}
	if len(owners)-1 != len(walked) {
		return nil // a component is missing: nothing below it to remove
	}
	operand, err := c.entry(m.Abs)
	if err != nil || operand == nil {
		return err
	}
	isDir := operand.Mode&unix.S_IFMT == unix.S_IFDIR
	raise := paths.HostOwned(owners, false) && !(m.Recursive && isDir)
	run := func() error { return c.unlink(m, isDir) }
	if raise {
		return run()
	}
	return asGuest(m.Guest, run)
}

func owner(abs string, st *unix.Stat_t) paths.Owner {
	return paths.Owner{Path: abs, UID: int(st.Uid), Mode: int64(st.Mode & 0o7777)}
}

// unlink removes the operand in its parent's handle, re-resolved under the credentials it
// runs with.
func (c *call) unlink(m Removal, isDir bool) error {
	pfd, err := c.dir(path.Dir(m.Abs))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	name := path.Base(m.Abs)
	if m.Recursive {
		err = removeAll(pfd, name, 0)
	} else {
		err = unix.Unlinkat(pfd, name, 0)
		if isDir && errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) && isDir {
			err = unix.EISDIR
		}
	}
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EISDIR):
		return &sandbox.PathError{Op: m.Op, Path: m.Shown, Err: fmt.Errorf("could not %s %s: %w", m.Op, m.Shown, sandbox.ErrIsDirectory)}
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS), errors.Is(err, unix.EBUSY):
		return &sandbox.PathError{Op: m.Op, Path: m.Shown, Err: fmt.Errorf("could not %s %s: %w (%w)", m.Op, m.Shown, fs.ErrPermission, err)}
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return c.resolveErr(m.Abs, err)
	}
	return &sandbox.PathError{Op: m.Op, Path: m.Shown, Err: fmt.Errorf("could not %s %s: %w", m.Op, m.Shown, err)}
}

// removeAll removes name in dirfd and, when it is a directory, everything below it, each
// directory opened no-follow beneath its parent's handle. A link is removed as an entry.
func removeAll(dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth >= maxDepth {
		return fmt.Errorf("hostfs: deeper than %d levels", maxDepth)
	}
	fd, oerr := openat2(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if errors.Is(oerr, unix.ENOTDIR) || errors.Is(oerr, unix.ELOOP) {
		return err // not a directory after all: the unlink's refusal stands
	}
	if oerr != nil {
		return oerr
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	for {
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if err := removeAll(fd, n, depth+1); err != nil {
				return err
			}
		}
		if rerr != nil {
			break // io.EOF: emptied (a name the guest adds meanwhile fails the rmdir below)
		}
		if _, err := d.Seek(0, 0); err != nil {
			return err
		}
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
