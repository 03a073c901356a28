package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Stat implements [Containers]. It reads the header of the archive GET
// (/containers/{id}/archive) and closes the stream at once, so a directory's subtree or a
// file's body never crosses the socket. The archive-stat HEAD ([Engine.StatType]) is far cheaper
// on a 20.10 engine, which starts a chrooted tar process for every GET (about 40 ms), but its
// answer carries no owner, and Stat's callers (the reach rule) need the owner.
func (a *Engine) Stat(ctx context.Context, target, guestPath string) (*Entry, error) {
	return statAnswer(a.copyOut(ctx, target, guestPath, -1))
}

// StatType implements [Driver] with the archive-stat HEAD: the engine's stat of guestPath
// (no-follow) from the X-Docker-Container-Path-Stat header, no archive at all. Its 404 is
// confirmed on the instance as the GET's is.
func (a *Engine) StatType(ctx context.Context, target, guestPath string) (*Entry, error) {
	r, err := newArchiveRead(target, guestPath, -1)
	if err != nil {
		return nil, err
	}
	args := r.args()
	var entry *Entry
	err = a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerStatPath(ctx, target, client.ContainerStatPathOptions{Path: guestPath})
		if err != nil {
			return b.copyOutFailure(ctx, "stat", target, guestPath, args, err)
		}
		entry = pathStatEntry(res.Stat)
		return nil
	})
	return statAnswer(entry, nil, err)
}

// pathStatEntry maps the engine's path stat to an [Entry]: the kind from the mode's type bits,
// the size for a regular file only, the permission bits with setuid, setgid and sticky in
// their tar places. The owner is unknown (-1).
func pathStatEntry(st container.PathStat) *Entry {
	m := st.Mode
	e := &Entry{Name: st.Name, Mode: int64(m.Perm()), UID: -1, GID: -1}
	if m&fs.ModeSetuid != 0 {
		e.Mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		e.Mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		e.Mode |= 0o1000
	}
	switch {
	case m.IsRegular():
		e.Type, e.Typeflag, e.Size = EntryFile, tar.TypeReg, st.Size
	case m.IsDir():
		e.Type, e.Typeflag = EntryDir, tar.TypeDir
	case m&fs.ModeSymlink != 0:
		e.Type, e.Typeflag, e.LinkTarget = EntrySymlink, tar.TypeSymlink, st.LinkTarget
	case m&fs.ModeNamedPipe != 0:
		e.Typeflag = tar.TypeFifo
	case m&fs.ModeCharDevice != 0:
		e.Typeflag = tar.TypeChar
	case m&fs.ModeDevice != 0:
		e.Typeflag = tar.TypeBlock
	}
	return e
}

// Read implements [Containers].
func (a *Engine) Read(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	if err := checkReadCap(guestPath, maxBytes); err != nil {
		return nil, nil, err
	}
	return a.copyOut(ctx, target, guestPath, maxBytes)
}

// copyOut GETs guestPath's archive and reads its first entry as it streams ([archiveRead]).
// The stream is closed as soon as that is read.
func (a *Engine) copyOut(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	r, err := newArchiveRead(target, guestPath, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	args := r.args()
	err = a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.CopyFromContainer(ctx, target, client.CopyFromContainerOptions{SourcePath: guestPath})
		if err != nil {
			return b.copyOutFailure(ctx, r.verb(), target, guestPath, args, err)
		}
		defer res.Content.Close()
		if r.consume(res.Content) != nil && ctx.Err() != nil {
			return ctx.Err() // the stream was cut by the budget or the caller: settle says which
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return r.answer()
}

// copyOutFailure classifies an archive GET the engine refused. Its 404 is ambiguous: the daemon
// answers it for a missing path and for a missing container alike. So absence is proven on
// the instance: the container is inspected, and the path counts as absent only when the
// container is still there under the full ID that was asked (a name is resolved to its ID and
// the GET asked again by ID).
func (b *apiBound) copyOutFailure(ctx context.Context, verb, target, guestPath string, args []string, err error) error {
	if !isAnswer(err) || !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker could not %s %s: %w", verb, guestPath, apiError(args, err, nil))
	}
	info, ierr := b.inspect(ctx, target)
	if ierr != nil {
		return fmt.Errorf("%s %s: confirm instance: %w", verb, guestPath, ierr)
	}
	if info.ID != target {
		// Asked by name (or short ID): ask again by the full ID, which no other container can
		// answer for.
		if _, err := b.client.ContainerStatPath(ctx, info.ID, client.ContainerStatPathOptions{Path: guestPath}); err == nil {
			return fmt.Errorf("%s %s: the path appeared while it was being read; ask again", verb, guestPath)
		} else if !isAnswer(err) || !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker could not %s %s: %w", verb, guestPath, apiError(args, err, nil))
		}
		again, ierr := b.inspect(ctx, info.ID)
		if ierr != nil {
			return fmt.Errorf("%s %s: confirm instance: %w", verb, guestPath, ierr)
		}
		if again.ID != info.ID {
			return fmt.Errorf("%s %s: confirm instance: %s answered as %s", verb, guestPath, info.ID, again.ID)
		}
	}
	return apiFailure(args, err, ErrPathAbsent)
}

// CopyIn implements [Containers]: the archive PUT at /, refusing to replace a directory with a
// non-directory or the reverse, owners taken from the archive (as `docker cp -`).
func (a *Engine) CopyIn(ctx context.Context, target string, tarball []byte) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	if len(tarball) == 0 {
		return fmt.Errorf("copy into %s: %w: empty archive", target, ErrInvalid)
	}
	args := []string{"cp", "-", target + ":/"}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.CopyToContainer(ctx, target, client.CopyToContainerOptions{
			DestinationPath: "/",
			Content:         bytes.NewReader(tarball),
		})
		if err != nil {
			// "/" always exists: a 404 can only be the container's absence. The daemon may also
			// answer 404 and close before it has read the body, which reaches us as a write
			// error (broken pipe): ask whether the container is still there before calling
			// that an unreachable daemon.
			if _, ierr := b.client.ContainerInspect(ctx, target, client.ContainerInspectOptions{}); ierr != nil {
				if cerr := apiError(args, ierr, nil); errors.Is(cerr, ErrNotFound) {
					return fmt.Errorf("copy into %s: %w", target, cerr)
				}
			}
			return fmt.Errorf("copy into %s: %w", target, apiError(args, err, nil))
		}
		return nil
	})
}
