package sandboxtest

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Sandbox is the in-memory fake of [sandbox.Sandbox]. It is safe for concurrent use.
type Sandbox struct {
	mu          sync.Mutex
	id          string
	base        string
	backendName string
	resetOK     bool
	reclaimErr  error
	fs          store
	baseline    store
	statErrs    map[string]error
	scripts     []Script
	execs       []Call
	runs        []Call
	reclaims    []Call
	resets      int
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// instances numbers generated instance IDs so that two fakes never share one.
var instances atomic.Int64

func nextInstanceID() string { return "fake-" + strconv.FormatInt(instances.Add(1), 10) }

// NewSandbox builds a fake sandbox whose store holds its storage base (default
// [DefaultStorageBase]) and the base's ancestors, as directories. That store is also the
// baseline Reset restores until [Sandbox.SetBaseline] is called. Nil options are skipped; the
// first option error is returned.
func NewSandbox(opts ...SandboxOption) (*Sandbox, error) {
	o := defaultSandboxOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.instanceID == "" {
		o.instanceID = nextInstanceID()
	}
	s := &Sandbox{id: o.instanceID, base: o.base, backendName: o.backendName, resetOK: o.reset,
		reclaimErr: o.reclaimErr, fs: newStore(), statErrs: map[string]error{}, scripts: slices.Clone(o.scripts)}
	if err := s.fs.mkdirAll(s.base); err != nil {
		return nil, err // unreachable: the store is empty
	}
	s.baseline = s.fs.clone()
	return s, nil
}

// InstanceID is the fake's identity; Reset changes it.
func (s *Sandbox) InstanceID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// StorageBase is the directory a relative working directory resolves beneath.
func (s *Sandbox) StorageBase() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// stat is the unconfined, no-follow stat the path policies walk with. Callers hold s.mu.
func (s *Sandbox) stat(_ context.Context, abs string) (*sandbox.FileStat, error) {
	if err := s.statErrs[abs]; err != nil {
		return nil, err
	}
	return s.fs.stat(abs), nil
}

// wd resolves a call's working directory against the storage base. Callers hold s.mu.
func (s *Sandbox) wd(wd string) string { return paths.ResolveWorkDir(s.base, wd) }

// WriteFile writes content under the write policy of protocol §6.3, creating missing parents
// as directories. Writing onto a directory fails with a [*sandbox.PathError] wrapping
// [sandbox.ErrIsDirectory]; a file or an "other" entry is replaced.
func (s *Sandbox) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := paths.ResolveWrite(ctx, s.stat, p, s.wd(wd))
	if err != nil {
		return err
	}
	if k, _ := s.fs.kind(r); k == sandbox.EntryDirectory {
		return &sandbox.PathError{Op: "write", Path: p, Err: sandbox.ErrIsDirectory}
	}
	// The walk has checked every existing ancestor is a directory; what is missing is made.
	if err := s.fs.mkdirAll(path.Dir(r)); err != nil {
		return &sandbox.PathError{Op: "write", Path: p, Err: err}
	}
	s.fs.drop(r)
	s.fs.files[r] = slices.Clone(content)
	return nil
}

// StatFile describes path under the read policy without following its last component;
// (nil, nil) when nothing is there. The entry's Path is relative to the working directory.
func (s *Sandbox) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wd = s.wd(wd)
	r, err := paths.ResolveRead(ctx, s.stat, p, wd)
	if err != nil {
		return nil, err
	}
	st, err := s.stat(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st == nil {
		return nil, nil
	}
	st.Path, _ = paths.RelativeTo(r, wd)
	return st, nil
}

// ReadFile returns a regular file's bytes under the read policy. A link or "other" entry
// fails with [*sandbox.NotRegularError]; a directory with a [*sandbox.PathError] wrapping
// [sandbox.ErrIsDirectory]; a missing path with one wrapping fs.ErrNotExist; content above
// maxBytes with [*sandbox.TransferCapExceededError] (never truncated); a negative maxBytes
// with [*sandbox.InvalidArgumentError].
func (s *Sandbox) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if maxBytes < 0 {
		return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("read %s: max bytes %d is negative", p, maxBytes)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := paths.ResolveRead(ctx, s.stat, p, s.wd(wd))
	if err != nil {
		return nil, err
	}
	st, err := s.stat(ctx, r)
	switch {
	case err != nil:
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: err}
	case st == nil:
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	case st.Kind == sandbox.EntryDirectory:
		return nil, &sandbox.PathError{Op: "read", Path: p, Err: sandbox.ErrIsDirectory}
	case st.Kind != sandbox.EntryFile:
		return nil, &sandbox.NotRegularError{Path: p, Kind: st.Kind}
	case *st.Size > maxBytes:
		return nil, &sandbox.TransferCapExceededError{Path: p, Cap: "max bytes", Limit: maxBytes, Actual: *st.Size}
	}
	return slices.Clone(s.fs.files[r]), nil
}

// Remove deletes path under the delete policy (protocol §4.7): the last component is never
// resolved, so a link is removed itself; absent is success; a directory, even an empty one,
// needs recursive and otherwise fails with a [*sandbox.PathError] wrapping
// [sandbox.ErrIsDirectory]. Links inside a removed tree are removed, never followed.
func (s *Sandbox) Remove(ctx context.Context, p, wd string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := paths.ResolveRemove(ctx, s.stat, p, s.wd(wd))
	if err != nil {
		return err
	}
	switch k, ok := s.fs.kind(r); {
	case !ok:
		return nil
	case k == sandbox.EntryDirectory && !recursive:
		return &sandbox.PathError{Op: "remove", Path: p, Err: sandbox.ErrIsDirectory}
	}
	s.fs.dropTree(r)
	return nil
}

// ListDir lists a directory's immediate children under the list policy, sorted by path, each
// with its path relative to the working directory and links listed as links. A missing
// directory fails with a [*sandbox.PathError] wrapping fs.ErrNotExist.
func (s *Sandbox) ListDir(ctx context.Context, p, wd string) ([]sandbox.FileStat, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wd = s.wd(wd)
	r, err := paths.ResolveList(ctx, s.stat, p, wd)
	if err != nil {
		return nil, err
	}
	// The walk included r: it is a directory, or missing.
	if _, ok := s.fs.kind(r); !ok {
		return nil, &sandbox.PathError{Op: "list", Path: p, Err: fs.ErrNotExist}
	}
	out := []sandbox.FileStat{}
	for _, child := range s.fs.children(r) {
		st := s.fs.stat(child)
		st.Path, _ = paths.RelativeTo(child, wd)
		out = append(out, *st)
	}
	return out, nil
}

// Reclaim removes dir and everything beneath it (protocol §4.9) after the checks of
// [paths.ResolveReclaim]; a link is removed itself. Absent is success, and wd need not
// exist. The call is recorded, refused or not. With [WithReclaimError] it fails after the
// checks, removing nothing.
func (s *Sandbox) Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("reclaim %s: %w", dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wd = s.wd(wd)
	s.reclaims = append(s.reclaims, Call{Text: dir, WorkDir: wd, Timeout: timeout})
	r, err := paths.ResolveReclaim(dir, wd)
	if err != nil {
		return err
	}
	if s.reclaimErr != nil {
		return s.reclaimErr
	}
	s.fs.dropTree(r)
	return nil
}

// Reset restores the baseline and changes the instance ID when the sandbox was built with
// [WithReset]; otherwise it fails with [*sandbox.UnsupportedError].
func (s *Sandbox) Reset(ctx context.Context, _ time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.resetOK {
		return &sandbox.UnsupportedError{Backend: s.backendName, Op: "reset",
			Reason: "this fake sandbox was built without WithReset; dispose it instead"}
	}
	s.fs = s.baseline.clone()
	s.id = nextInstanceID()
	s.resets++
	return nil
}

// SetBaseline records the current store as what Reset restores.
func (s *Sandbox) SetBaseline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.baseline = s.fs.clone()
}

// Resets counts successful Resets.
func (s *Sandbox) Resets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resets
}

// bindBase makes base the storage base and ensures it exists, as an acquire must (protocol
// §7): a link or non-directory on the way is refused, nothing else is touched.
func (s *Sandbox) bindBase(ctx context.Context, base string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	base = paths.Normalize(base)
	if !path.IsAbs(base) {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("storage base %q is not absolute", base)}
	}
	if err := paths.RefuseSymlinkedAncestors(ctx, s.stat, base, "/", true); err != nil {
		return err
	}
	if err := s.fs.mkdirAll(base); err != nil {
		return &sandbox.PathError{Op: "prepare", Path: base, Err: err}
	}
	s.base = base
	return nil
}
