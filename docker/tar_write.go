package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"strings"
	"time"
)

// TarEntry is one entry of an archive sent to `docker cp - <container>:/`. Name is the absolute
// guest path; it travels without its leading "/" (the destination is "/", which always exists).
type TarEntry struct {
	Name    string
	Dir     bool
	Mode    int64
	UID     int
	GID     int
	Content []byte    // regular files only
	ModTime time.Time // zero: the time the archive is built
}

// FileEntry is a regular file at guestPath holding content, with mode and owner.
func FileEntry(guestPath string, content []byte, mode int64, uid, gid int) TarEntry {
	return TarEntry{Name: guestPath, Mode: mode, UID: uid, GID: gid, Content: content}
}

// DirEntry is a directory at guestPath with mode and owner.
func DirEntry(guestPath string, mode int64, uid, gid int) TarEntry {
	return TarEntry{Name: guestPath, Dir: true, Mode: mode, UID: uid, GID: gid}
}

// DirChain is the entries that create a storage base: every directory in dirs (top down), mode
// 0755, owned 0:0 except the last, which is owned uid:gid.
func DirChain(dirs []string, uid, gid int) []TarEntry {
	out := make([]TarEntry, 0, len(dirs))
	for i, d := range dirs {
		if i == len(dirs)-1 {
			out = append(out, DirEntry(d, 0o755, uid, gid))
		} else {
			out = append(out, DirEntry(d, 0o755, 0, 0))
		}
	}
	return out
}

// BuildTar builds, in memory, the archive of entries in the order given. Every name must be an
// absolute, normalised guest path other than "/"; owners must not be negative; directories carry
// no content. Anything else is [ErrInvalid].
func BuildTar(entries ...TarEntry) ([]byte, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("build tar: %w: no entries", ErrInvalid)
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	now := time.Now().Truncate(time.Second)
	for _, e := range entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("build tar: %w", err)
		}
		mt := e.ModTime
		if mt.IsZero() {
			mt = now
		}
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.Name, "/"),
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mt.Truncate(time.Second),
		}
		if e.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Content))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("build tar %s: %w", e.Name, err)
		}
		if !e.Dir {
			if _, err := w.Write(e.Content); err != nil {
				return nil, fmt.Errorf("build tar %s: %w", e.Name, err)
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("build tar: %w", err)
	}
	return buf.Bytes(), nil
}

func (e TarEntry) check() error {
	switch {
	case !strings.HasPrefix(e.Name, "/") || e.Name == "/":
		return fmt.Errorf("%w: entry %q is not an absolute path below /", ErrInvalid, e.Name)
	case path.Clean(e.Name) != e.Name:
		return fmt.Errorf("%w: entry %q is not normalised", ErrInvalid, e.Name)
	case strings.ContainsAny(e.Name, "\x00\\"):
		return fmt.Errorf("%w: entry %q contains a NUL or backslash", ErrInvalid, e.Name)
	case e.UID < 0 || e.GID < 0:
		return fmt.Errorf("%w: entry %q has a negative owner", ErrInvalid, e.Name)
	case e.Mode < 0 || e.Mode > 0o7777:
		return fmt.Errorf("%w: entry %q has mode bits beyond 07777", ErrInvalid, e.Name)
	case e.Dir && len(e.Content) > 0:
		return fmt.Errorf("%w: directory entry %q has content", ErrInvalid, e.Name)
	}
	return nil
}
