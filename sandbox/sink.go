package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SinkOption configures a sink built by [FileSystemSink].
type SinkOption func(*sinkOptions) error

type sinkOptions struct {
	display       func(Artifact) string
	replace       bool
	normalization NameNormalization
}

// WithDisplay sets the text a landed artifact shows the model. The default is
// "<name> (<n> bytes)". A nil function is refused.
func WithDisplay(display func(a Artifact) string) SinkOption {
	return func(o *sinkOptions) error {
		if display == nil {
			return &InvalidArgumentError{Reason: "file system sink: the display function is nil"}
		}
		o.display = display
		return nil
	}
}

// WithReplaceExisting lets an artifact replace an existing file of its name. Without it an
// existing destination fails with [*LandingExistsError]. The file is replaced by renaming a
// fresh one over it, so a link at the destination is replaced, never followed; a directory is
// never replaced (still [*LandingExistsError]).
func WithReplaceExisting() SinkOption {
	return func(o *sinkOptions) error { o.replace = true; return nil }
}

// WithNameNormalization sets the normalization [CollectOutputs] applies to names delivered to
// the sink (default [NormalizeNFC]).
func WithNameNormalization(n NameNormalization) SinkOption {
	return func(o *sinkOptions) error {
		parsed, err := ParseNameNormalization(string(n))
		if err != nil {
			return err
		}
		o.normalization = parsed
		return nil
	}
}

// FileSystemSink lands artifacts as files below root, a host directory that must exist. root
// is resolved once, following links. Each artifact lands at root/<name>, its "/" separated
// segments becoming directories, which are created as needed. The bytes are written exactly.
// The landed artifact's handle is the host path and its display is "<name> (<n> bytes)"
// unless [WithDisplay] says otherwise.
//
// Deliver fails with [*LandingNotConfinedError], naming only the artifact, when the name or a
// link among the destination's existing parents leads outside root (a link that stays inside
// root is followed); with [*ArtifactNameInvalidError] for a name breaking
// [ValidateArtifactName]; with [*LandingExistsError] when the destination exists, unless
// [WithReplaceExisting] is given. Other errors name the artifact and never a host path.
//
// The checks and the write are separate steps: the write itself is confined to the deepest
// existing parent (by [os.Root]), but a process that swaps one of those existing parents for a
// link between the two steps can still win the race. Keep root out of reach of processes you
// do not trust.
func FileSystemSink(root string, opts ...SinkOption) (*OutputSink, error) {
	o := sinkOptions{display: defaultDisplay, normalization: NormalizeNFC}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if root == "" {
		return nil, &InvalidArgumentError{Reason: "file system sink: the root is empty"}
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolve sink root: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("resolve sink root: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("resolve sink root: %w", err)
	}
	if !fi.IsDir() {
		return nil, &InvalidArgumentError{Reason: fmt.Sprintf("file system sink: root %q is not a directory", root)}
	}
	s := &fsSink{root: resolved, opts: o}
	return &OutputSink{Deliver: s.deliver, Normalization: o.normalization}, nil
}

func defaultDisplay(a Artifact) string { return fmt.Sprintf("%s (%d bytes)", a.Name, len(a.Content)) }

type fsSink struct {
	root string // absolute, links resolved
	opts sinkOptions
}

func (s *fsSink) deliver(ctx context.Context, a Artifact) (LandedArtifact, error) {
	if err := ctx.Err(); err != nil {
		return LandedArtifact{}, fmt.Errorf("land artifact %q: %w", a.Name, err)
	}
	if escapesLexically(a.Name) {
		return LandedArtifact{}, &LandingNotConfinedError{Name: a.Name}
	}
	if err := ValidateArtifactName(a.Name); err != nil {
		return LandedArtifact{}, err
	}
	segments := strings.Split(a.Name, "/")
	dirs, leaf := segments[:len(segments)-1], segments[len(segments)-1]

	base, missing, err := s.existingParent(a.Name, dirs)
	if err != nil {
		return LandedArtifact{}, err
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		return LandedArtifact{}, s.hostPathsHidden(a.Name, err)
	}
	defer r.Close()

	rel := filepath.Join(append(missing, leaf)...)
	if len(missing) > 0 {
		if err := r.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
			return LandedArtifact{}, s.hostPathsHidden(a.Name, err)
		}
	}
	if s.opts.replace {
		err = replaceFile(r, rel, a.Content)
	} else {
		err = createFile(r, rel, a.Content)
	}
	if errors.Is(err, fs.ErrExist) {
		return LandedArtifact{}, &LandingExistsError{Name: a.Name}
	}
	if err != nil {
		return LandedArtifact{}, s.hostPathsHidden(a.Name, err)
	}
	handle := filepath.Join(base, rel)
	return LandedArtifact{Name: a.Name, Display: s.opts.display(a), Handle: &handle}, nil
}

// escapesLexically reports a name that leaves root before any link is consulted: absolute,
// climbing with "..", or carrying a backslash (a separator on some hosts).
func escapesLexically(name string) bool {
	if strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || filepath.IsAbs(name) {
		return true
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

// existingParent walks the destination's parent directories below root, outermost first,
// resolving every link it meets and refusing one that leads outside root. It returns the
// deepest existing parent (links resolved) and the directories still to create below it.
func (s *fsSink) existingParent(name string, dirs []string) (string, []string, error) {
	cur := s.root
	for i, seg := range dirs {
		next := filepath.Join(cur, seg)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return cur, dirs[i:], nil
		}
		if err != nil {
			return "", nil, s.hostPathsHidden(name, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// A dangling link cannot be shown to stay inside root: refuse it too.
			real, err := filepath.EvalSymlinks(next)
			if err != nil || !within(real, s.root) {
				return "", nil, &LandingNotConfinedError{Name: name}
			}
			if fi, err = os.Stat(real); err != nil {
				return "", nil, s.hostPathsHidden(name, err)
			}
			next = real
		}
		if !fi.IsDir() {
			return "", nil, fmt.Errorf("land artifact %q: %w", name, &NotDirectoryError{Path: strings.Join(dirs[:i+1], "/")})
		}
		cur = next
	}
	return cur, nil, nil
}

// within reports whether p (absolute, clean) is root or below it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// createFile writes content to a new file, failing with fs.ErrExist when name exists (even
// as a link, which is never followed).
func createFile(r *os.Root, name string, content []byte) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := writeAndClose(f, content); err != nil {
		_ = r.Remove(name)
		return err
	}
	return nil
}

// replaceFile writes content to a fresh file beside name and renames it over name.
func replaceFile(r *os.Root, name string, content []byte) error {
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	// The temporary name does not grow with the artifact's, which may already be as long as a
	// file name can be.
	tmp := filepath.Join(filepath.Dir(name), ".landing-"+hex.EncodeToString(suffix[:]))
	if err := createFile(r, tmp, content); err != nil {
		return err
	}
	if err := r.Rename(tmp, name); err != nil {
		_ = r.Remove(tmp)
		return err
	}
	return nil
}

func writeAndClose(f *os.File, content []byte) error {
	_, err := f.Write(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// hostPathsHidden wraps err for the artifact, rewriting a host path it carries relative to
// the sink's root so that no host path reaches the message.
func (s *fsSink) hostPathsHidden(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		p := pe.Path
		if filepath.IsAbs(p) {
			if rel, rerr := filepath.Rel(s.root, p); rerr == nil && within(p, s.root) {
				p = filepath.ToSlash(rel)
			} else {
				p = "(outside the sink's root)"
			}
		}
		err = &fs.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return fmt.Errorf("land artifact %q: %w", name, err)
}
