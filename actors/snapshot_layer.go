package actors

// A snapshot's layer: what a container changed against its image, as one tar archive in the
// image layer format the daemon itself loads (whiteouts for deletions), so that restoring it
// is loading an image of the snapshot's image plus this layer and creating a container from it.
//
// Built from the daemon's change list (docker diff) and its archive GETs, never from a guest
// answer: an added subtree is one archive of its top, a changed file one archive of itself, a
// deleted path a whiteout (".wh." + its name) in its parent, and every directory above them an
// entry of its own (the daemon's header of it), since a layer whose parents are missing would
// have them made with mode 0600. The layer format cannot hold a guest file whose name begins
// with ".wh." (it would read as a deletion when loaded), so such a snapshot is refused.
//
// The engine's own files in a container (the exec channel's supervisor, a pool member's
// binding) are not the guest's state and are left out: a restored sandbox gets the restoring
// engine's supervisor, and the key it is acquired for.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// whiteoutPrefix marks a deletion in an image layer; opaqueWhiteout hides a lower directory's
// contents. Both are the layer format's (AUFS whiteouts, which the daemon loads).
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// engineFiles are the paths the engine itself writes into a container's root, never kept.
var engineFiles = []string{execwire.Binary, bindingPath}

// layerPlan is what a snapshot reads of a container, every path absolute and sorted.
type layerPlan struct {
	headers   []string // directories whose own entry the layer carries
	roots     []string // paths whose archive the layer carries whole
	whiteouts []string // paths deleted against the image
}

// planLayer turns the daemon's change list into a plan. isDir says whether a changed path
// (one the image already had) is a directory: then only its own entry is carried.
func planLayer(ctx context.Context, changes []docker.Change, isDir func(ctx context.Context, p string) (bool, error)) (layerPlan, error) {
	kind := make(map[string]docker.ChangeKind, len(changes))
	for _, c := range changes {
		if p := path.Clean(c.Path); !slices.Contains(engineFiles, p) {
			kind[p] = c.Kind
		}
	}
	under := func(p string, kinds ...docker.ChangeKind) bool {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if slices.Contains(kinds, kind[d]) {
				return true
			}
		}
		return false
	}
	var plan layerPlan
	var modified []string
	for p, k := range kind {
		switch {
		case p == "/":
		case k == docker.ChangeAdded && !under(p, docker.ChangeAdded):
			plan.roots = append(plan.roots, p)
		case k == docker.ChangeDeleted && !under(p, docker.ChangeAdded, docker.ChangeDeleted):
			plan.whiteouts = append(plan.whiteouts, p)
		case k == docker.ChangeModified && !under(p, docker.ChangeAdded):
			modified = append(modified, p)
		}
	}
	dirs, err := parallelMap(ctx, modified, 8, isDir)
	if err != nil {
		return layerPlan{}, err
	}
	headers := map[string]bool{}
	for i, p := range modified {
		if dirs[i] {
			headers[p] = true
		} else {
			plan.roots = append(plan.roots, p)
		}
	}
	for _, p := range slices.Concat(plan.roots, plan.whiteouts, slices.Collect(mapKeys(headers))) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			headers[d] = true
		}
	}
	plan.headers = slices.Collect(mapKeys(headers))
	for _, l := range [][]string{plan.headers, plan.roots, plan.whiteouts} {
		slices.Sort(l)
	}
	return plan, nil
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parallelMap runs fn over in, at most n at once, keeping the order; the first error wins.
func parallelMap[T any](ctx context.Context, in []string, n int, fn func(context.Context, string) (T, error)) ([]T, error) {
	out := make([]T, len(in))
	errs := make([]error, len(in))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, p := range in {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = fn(ctx, p)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// archiver streams a path of the container out as the daemon tars it.
type archiver func(ctx context.Context, guestPath string) (io.ReadCloser, error)

// layerStats is what writing a layer counted.
type layerStats struct{ entries int }

// writeLayer writes plan's layer to w: the directories' own entries (parents first), the
// archives of the roots, then the whiteouts.
func writeLayer(ctx context.Context, w io.Writer, plan layerPlan, archive archiver) (layerStats, error) {
	tw := tar.NewWriter(w)
	var st layerStats
	headers, err := parallelMap(ctx, plan.headers, 8, func(ctx context.Context, dir string) (*tar.Header, error) {
		return dirHeader(ctx, archive, dir)
	})
	if err != nil {
		return st, err
	}
	for _, h := range headers {
		if err := tw.WriteHeader(h); err != nil {
			return st, fmt.Errorf("write layer: %w", err)
		}
		st.entries++
	}
	for _, root := range plan.roots {
		n, err := copyRoot(ctx, tw, archive, root)
		st.entries += n
		if err != nil {
			return st, err
		}
	}
	for _, p := range plan.whiteouts {
		name := strings.TrimPrefix(path.Join(path.Dir(p), whiteoutPrefix+path.Base(p)), "/")
		h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(h); err != nil {
			return st, fmt.Errorf("write layer: %w", err)
		}
		st.entries++
	}
	if err := tw.Close(); err != nil {
		return st, fmt.Errorf("write layer: %w", err)
	}
	return st, nil
}

// dirHeader is the daemon's own header of directory dir (its archive's first entry; the
// subtree behind it is never read), named for the layer.
func dirHeader(ctx context.Context, archive archiver, dir string) (*tar.Header, error) {
	rc, err := archive(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("read the entry of %s: %w", dir, err)
	}
	defer rc.Close()
	h, err := tar.NewReader(rc).Next()
	if err != nil {
		return nil, fmt.Errorf("read the entry of %s: %w", dir, err)
	}
	if h.Typeflag != tar.TypeDir || strings.TrimSuffix(h.Name, "/") != path.Base(dir) {
		return nil, fmt.Errorf("read the entry of %s: the daemon answered %q (type %q)", dir, h.Name, h.Typeflag)
	}
	h.Name = strings.TrimPrefix(dir, "/") + "/"
	h.Format = tar.FormatUnknown
	return h, nil
}

// copyRoot copies root's archive into the layer, each entry renamed from the archive's base
// name to its path; a hard link is renamed alike and must stay within the archive.
func copyRoot(ctx context.Context, tw *tar.Writer, archive archiver, root string) (int, error) {
	rc, err := archive(ctx, root)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", root, err)
	}
	defer rc.Close()
	base, parent := path.Base(root), strings.TrimPrefix(path.Dir(root), "/")
	rename := func(name string) (string, bool) {
		name = strings.TrimSuffix(name, "/")
		if name != base && !strings.HasPrefix(name, base+"/") || path.Clean(name) != name {
			return "", false
		}
		return path.Join(parent, name), true
	}
	tr := tar.NewReader(rc)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read %s: %w", root, err)
		}
		name, ok := rename(h.Name)
		if !ok {
			return n, &sandbox.SnapshotRefusedError{Path: h.Name, Reason: "the daemon's archive of " + root + " holds an entry outside it"}
		}
		if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
			return n, &sandbox.SnapshotRefusedError{Path: "/" + name,
				Reason: "a file whose name begins with \".wh.\" cannot be kept: an image layer reads that name as a deletion; rename or remove it"}
		}
		if h.Typeflag == tar.TypeLink {
			target, ok := rename(h.Linkname)
			if !ok {
				return n, &sandbox.SnapshotRefusedError{Path: "/" + name, Reason: "a hard link to an entry outside its archive"}
			}
			h.Linkname = target
		}
		if h.Typeflag == tar.TypeDir {
			name += "/"
		}
		h.Name, h.Format = name, tar.FormatUnknown
		if err := tw.WriteHeader(h); err != nil {
			return n, fmt.Errorf("write layer: %w", err)
		}
		if _, err := io.Copy(tw, ctxReader{ctx, tr}); err != nil {
			return n, fmt.Errorf("read %s: %w", root, err)
		}
		n++
	}
}

// checkLayer reads a snapshot's layer to its end and refuses what would not restore as the
// same things inside the new sandbox alone: a name that is absolute, not clean or climbs out
// ("..") or holds a NUL; an entry beneath an entry of the layer that is not a directory (a
// link put first and a file written through it); a hard link to anything but a regular file
// earlier in the layer; a whiteout of nothing ("", ".", ".."), of the layer format's own
// metadata, or that is not an empty regular file; and any entry type but a regular file,
// directory, symbolic or hard link, device node or FIFO. Links pointing anywhere, device
// nodes, setuid bits and odd bytes in names pass: they are data, restored as such by the
// daemon inside the new container's root.
func checkLayer(r io.Reader) (entries int, err error) {
	seen := map[string]byte{} // name → type flag
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return entries, &sandbox.SnapshotRefusedError{Reason: "the layer is not a readable tar archive: " + err.Error()}
		}
		if err := checkEntry(h, seen); err != nil {
			return entries, err
		}
		entries++
	}
}

func checkEntry(h *tar.Header, seen map[string]byte) error {
	name := strings.TrimSuffix(h.Name, "/")
	if reason := badName(h.Name, name, seen); reason != "" {
		return &sandbox.SnapshotRefusedError{Path: h.Name, Reason: reason}
	}
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		if reason := badWhiteout(h, path.Base(name)); reason != "" {
			return &sandbox.SnapshotRefusedError{Path: h.Name, Reason: reason}
		}
		return nil // marks a deletion; no entry of its own
	}
	if reason := badType(h, seen); reason != "" {
		return &sandbox.SnapshotRefusedError{Path: h.Name, Reason: reason}
	}
	if _, dup := seen[name]; dup {
		return &sandbox.SnapshotRefusedError{Path: h.Name, Reason: "an entry given twice"}
	}
	t := h.Typeflag
	if t == tar.TypeLink {
		t = tar.TypeReg
	}
	seen[name] = t
	return nil
}

// badName says why an entry's name is refused; "" when it is not.
func badName(raw, name string, seen map[string]byte) string {
	switch {
	case name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(raw, 0):
		return "an entry name that is empty, absolute or holds a NUL"
	case !cleanRelative(name):
		return "an entry name that is not clean or climbs out of the root"
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if t, ok := seen[d]; ok && t != tar.TypeDir {
			return "an entry beneath an entry of the layer that is not a directory"
		}
	}
	return ""
}

func cleanRelative(name string) bool {
	return path.Clean(name) == name && name != ".." && !strings.HasPrefix(name, "../") && !strings.HasPrefix(name, "/")
}

// badWhiteout says why a whiteout (base begins with ".wh.") is refused; "" when it is not.
func badWhiteout(h *tar.Header, base string) string {
	gone := strings.TrimPrefix(base, whiteoutPrefix)
	switch {
	case h.Typeflag != tar.TypeReg || h.Size != 0:
		return "a whiteout that is not an empty regular file"
	case gone == "" || gone == "." || gone == ".." || strings.HasPrefix(gone, whiteoutPrefix):
		return "a whiteout of nothing, or of the layer format's own metadata"
	}
	return ""
}

// badType says why an entry's type is refused; "" when it is not.
func badType(h *tar.Header, seen map[string]byte) string {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return ""
	case tar.TypeLink:
		if !cleanRelative(h.Linkname) {
			return "a hard link whose target is not a clean name within the layer"
		}
		if t, ok := seen[h.Linkname]; !ok || t != tar.TypeReg {
			return "a hard link to something the layer does not hold as a regular file before it"
		}
		return ""
	}
	return fmt.Sprintf("an entry of type %q, which a snapshot never holds", h.Typeflag)
}
