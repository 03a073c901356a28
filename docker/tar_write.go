package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"strings"
	"time"
)

// TarEntry is one entry of an archive sent to `docker cp - <container>:/`, made by [FileEntry],
// [DirEntry], [LinkEntry] or [DirChain]; [BuildTar] checks it. Its name is the absolute guest
// path; it travels without its leading "/" (the destination is "/", which always exists).
type TarEntry struct {
	name    string
	dir     bool
	link    string // a hard link: the absolute guest path of an entry earlier in the same archive
	mode    int64
	uid     int
	gid     int
	content []byte    // regular files only
	modTime time.Time // zero: the time the archive is built
}

// FileEntry is a regular file at guestPath holding content, with mode and owner.
func FileEntry(guestPath string, content []byte, mode int64, uid, gid int) TarEntry {
	return TarEntry{name: guestPath, mode: mode, uid: uid, gid: gid, content: content}
}

// DirEntry is a directory at guestPath with mode and owner.
func DirEntry(guestPath string, mode int64, uid, gid int) TarEntry {
	return TarEntry{name: guestPath, dir: true, mode: mode, uid: uid, gid: gid}
}

// LinkEntry is a hard link at guestPath to the regular file at linkTo, which an earlier entry
// of the same archive wrote, with mode and owner. The daemon's extraction removes whatever
// guestPath names (without following it) and then links it, both while it reads this one
// header: the name goes from its old entry to the complete file with nothing in between that
// a cut archive could leave behind. That is the staged write's commit (see the actors'
// container_write.go).
func LinkEntry(guestPath, linkTo string, mode int64, uid, gid int) TarEntry {
	return TarEntry{name: guestPath, link: linkTo, mode: mode, uid: uid, gid: gid}
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

// BuildTar builds, in memory, the archive of entries in the order given. Every name (and every
// hard link's target) must be an absolute, normalised guest path other than "/"; owners must not
// be negative; directories and links carry no content; a link's target is a regular file an
// earlier entry wrote. Anything else is [ErrInvalid].
func BuildTar(entries ...TarEntry) ([]byte, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("build tar: %w: no entries", ErrInvalid)
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	now := time.Now().Truncate(time.Second)
	files := map[string]bool{}
	for _, e := range entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("build tar: %w", err)
		}
		switch {
		case e.link != "" && !files[e.link]:
			return nil, fmt.Errorf("build tar: %w: link %q names %q, which no earlier entry wrote as a file", ErrInvalid, e.name, e.link)
		case !e.dir && e.link == "":
			files[e.name] = true
		}
		mt := e.modTime
		if mt.IsZero() {
			mt = now
		}
		h := &tar.Header{
			Name:    strings.TrimPrefix(e.name, "/"),
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mt.Truncate(time.Second),
		}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeLink, strings.TrimPrefix(e.link, "/")
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.content))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("build tar %s: %w", e.name, err)
		}
		if !e.dir && e.link == "" {
			if _, err := w.Write(e.content); err != nil {
				return nil, fmt.Errorf("build tar %s: %w", e.name, err)
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
	case !strings.HasPrefix(e.name, "/") || e.name == "/":
		return fmt.Errorf("%w: entry %q is not an absolute path below /", ErrInvalid, e.name)
	case path.Clean(e.name) != e.name:
		return fmt.Errorf("%w: entry %q is not normalised", ErrInvalid, e.name)
	case strings.ContainsAny(e.name, "\x00\\"):
		return fmt.Errorf("%w: entry %q contains a NUL or backslash", ErrInvalid, e.name)
	case e.uid < 0 || e.gid < 0:
		return fmt.Errorf("%w: entry %q has a negative owner", ErrInvalid, e.name)
	case e.mode < 0 || e.mode > 0o7777:
		return fmt.Errorf("%w: entry %q has mode bits beyond 07777", ErrInvalid, e.name)
	case e.dir && len(e.content) > 0:
		return fmt.Errorf("%w: directory entry %q has content", ErrInvalid, e.name)
	case e.link == "":
		return nil
	case e.dir || len(e.content) > 0:
		return fmt.Errorf("%w: link entry %q is a directory or has content", ErrInvalid, e.name)
	case !strings.HasPrefix(e.link, "/") || e.link == "/" || path.Clean(e.link) != e.link || strings.ContainsAny(e.link, "\x00\\"):
		return fmt.Errorf("%w: link entry %q names %q, not a normalised absolute path below /", ErrInvalid, e.name, e.link)
	case e.link == e.name:
		return fmt.Errorf("%w: link entry %q names itself", ErrInvalid, e.name)
	}
	return nil
}
