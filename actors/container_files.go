package actors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// statRequest asks for a no-follow description of Path under WorkDir.
type statRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
}

// statResponse carries the entry, nil when the engine says it is absent.
type statResponse struct {
	Stat *sandbox.FileStat
	Err  error
}

func (*statRequest) needsFreeze() bool  { return true }
func (*statRequest) fail(err error) any { return &statResponse{Err: err} }

func (m *statRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound) // a handle's call: its acquire's binding, if this actor has none
	st, err := a.stat(ctx, m)
	reply(&statResponse{Stat: st, Err: a.vanished(m.InstanceID, err)})
}

// readRequest asks for a regular file's bytes, refused above MaxBytes.
type readRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	MaxBytes   int64
}

// readResponse carries the file's bytes.
type readResponse struct {
	Content []byte
	Err     error
}

func (*readRequest) needsFreeze() bool  { return true }
func (*readRequest) fail(err error) any { return &readResponse{Err: err} }

func (m *readRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	b, err := a.read(ctx, m)
	reply(&readResponse{Content: b, Err: a.vanished(m.InstanceID, err)})
}

// writeRequest asks to write Content at Path, replacing any file there.
type writeRequest struct {
	InstanceID string // the instance the caller acquired; a replaced one is refused
	Path       string
	WorkDir    string
	Content    []byte
}

// writeResponse says whether the write landed.
type writeResponse struct {
	Err error
}

func (*writeRequest) needsFreeze() bool  { return true }
func (*writeRequest) fail(err error) any { return &writeResponse{Err: err} }

func (m *writeRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	reply(&writeResponse{Err: a.vanished(m.InstanceID, a.write(ctx, m))})
}

// The file surface. Every member that makes more than one engine call holds one freeze across
// its check and its copy: docker cp resolves paths daemon-side with root authority and has no
// no-follow form, so only a frozen guest cannot swap a checked component for a link.

// workingDir resolves the caller's working directory: relative ones lie beneath the bound
// storage base, "." naming the base; absolute ones are taken as given.
func (a *containerActor) workingDir(wd string) string {
	base := a.workDir
	if base == "" {
		base = DefaultWorkDir
	}
	return paths.ResolveWorkDir(base, wd)
}

// target is the instance a call addresses: the one the caller acquired. A call made through
// the handle of an instance known to be gone, or replaced since, is refused with
// [*sandbox.GoneError] rather than landing in its successor.
func (a *containerActor) target(instanceID string) (string, error) {
	if instanceID == "" {
		return "", &sandbox.InvalidArgumentError{Reason: "the call names no sandbox instance"}
	}
	if instanceID == a.lost {
		return "", &sandbox.GoneError{InstanceID: instanceID, Reason: a.lostReason}
	}
	if a.info != nil && a.info.ID != instanceID {
		return "", &sandbox.GoneError{InstanceID: instanceID, Reason: fmt.Sprintf("%s was replaced by instance %.12s", a.name, a.info.ID)}
	}
	return instanceID, nil
}

// locate is the string-only part of every path call, before any engine call or freeze: the
// instance the handle addresses, the working directory resolved under the base, and the path
// confined to it. A non-empty refuseWD names the operation that may not target the working
// directory itself.
func (a *containerActor) locate(instanceID, p, wd, refuseWD string) (target, abs, wdAbs string, err error) {
	if target, err = a.target(instanceID); err != nil {
		return "", "", "", err
	}
	wdAbs = paths.Normalize(a.workingDir(wd))
	if abs, err = paths.ConfineResolve(p, wdAbs); err != nil {
		return "", "", "", err
	}
	if refuseWD != "" && abs == wdAbs {
		return "", "", "", &sandbox.NotConfinedError{Path: p, WorkDir: wdAbs, Reason: "refusing to " + refuseWD + " the working directory itself"}
	}
	return target, abs, wdAbs, nil
}

// guestStat is the unconfined, no-follow stat the ancestor walk runs on: the engine's archive
// header, never the guest. record, when set, sees every entry found.
func (a *containerActor) guestStat(target string, memo *statMemo, record func(abs string, e *docker.Entry)) paths.StatFunc {
	return func(ctx context.Context, abs string) (*sandbox.FileStat, error) {
		e, err := memo.stat(ctx, a.b.engine, target, abs)
		if err != nil {
			return nil, fmt.Errorf("docker could not stat %s: %w", abs, err)
		}
		if e == nil {
			return nil, nil
		}
		if record != nil {
			record(abs, e)
		}
		return fileStat(abs, e), nil
	}
}

func fileStat(rel string, e *docker.Entry) *sandbox.FileStat {
	switch e.Type {
	case docker.EntryFile:
		return sandbox.NewFileStat(rel, sandbox.EntryFile, e.Size)
	case docker.EntryDir:
		return sandbox.NewFileStat(rel, sandbox.EntryDirectory, 0)
	case docker.EntrySymlink:
		return sandbox.NewFileStat(rel, sandbox.EntrySymlink, 0)
	}
	return sandbox.NewFileStat(rel, sandbox.EntryOther, 0)
}

func (a *containerActor) stat(ctx context.Context, m *statRequest) (*sandbox.FileStat, error) {
	target, abs, wd, err := a.locate(m.InstanceID, m.Path, m.WorkDir, "")
	if err != nil {
		return nil, err // no freeze is bought for a path no spelling could contain
	}
	var st *sandbox.FileStat
	err = a.onPlane(ctx, "stat", target, func(ctx context.Context, p filePlane) (err error) {
		st, err = p.stat(ctx, target, m.Path, abs, wd)
		return err
	})
	return st, err
}

// archiveStat is stat on the archive plane: the walk and the stat under one freeze.
func (a *containerActor) archiveStat(ctx context.Context, target, userPath, abs, wd string) (*sandbox.FileStat, error) {
	var st *sandbox.FileStat
	err := a.frozen(ctx, target, func(ctx context.Context) error {
		memo := newKindMemo()
		memo.prefetch(ctx, a.b.engine, target, paths.Prefixes(abs))
		stat := a.guestStat(target, memo, nil)
		abs, err := paths.ResolveRead(ctx, stat, userPath, wd)
		if err != nil {
			return err
		}
		st, err = stat(ctx, abs)
		if st != nil {
			st.Path, _ = paths.RelativeTo(abs, paths.Normalize(wd))
		}
		return err
	})
	return st, err
}

func (a *containerActor) read(ctx context.Context, m *readRequest) ([]byte, error) {
	if m.MaxBytes < 0 {
		return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("max bytes must not be negative, got %d", m.MaxBytes)}
	}
	target, abs, wd, err := a.locate(m.InstanceID, m.Path, m.WorkDir, "")
	if err != nil {
		return nil, err
	}
	var body []byte
	err = a.onPlane(ctx, "read", target, func(ctx context.Context, p filePlane) (err error) {
		body, err = p.read(ctx, target, m.Path, abs, wd, m.MaxBytes)
		return err
	})
	return body, err
}

// archiveRead is read on the archive plane: the walk and the archive GET under one freeze.
func (a *containerActor) archiveRead(ctx context.Context, target, userPath, abs, wd string, maxBytes int64) ([]byte, error) {
	var (
		entry   *docker.Entry
		body    []byte
		checked bool
	)
	err := a.frozen(ctx, target, func(ctx context.Context) error {
		// Frozen, the walk's stats and the read itself are independent: run them together and
		// keep the read only if the walk clears the path.
		var readErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			entry, body, readErr = a.b.engine.Read(ctx, target, abs, maxBytes)
		}()
		memo := newKindMemo()
		memo.prefetch(ctx, a.b.engine, target, paths.Prefixes(parentOf(abs)))
		_, err := paths.ResolveRead(ctx, a.guestStat(target, memo, nil), userPath, wd)
		<-done
		if err != nil {
			entry, body = nil, nil
			return err
		}
		checked = true
		return readErr
	})
	var capErr *docker.CapExceededError
	switch {
	case errors.Is(err, docker.ErrPathAbsent):
		return nil, &sandbox.PathError{Op: "read", Path: userPath, Err: fs.ErrNotExist}
	case errors.As(err, &capErr):
		return nil, &sandbox.TransferCapExceededError{Path: userPath, Cap: "max bytes", Limit: maxBytes, Actual: capErr.Size}
	case err != nil && checked && !isProtocolError(err):
		return nil, fmt.Errorf("docker could not read %s: %w", userPath, err)
	case err != nil:
		return nil, err
	case entry.Type == docker.EntryDir:
		return nil, &sandbox.PathError{Op: "read", Path: userPath, Err: sandbox.ErrIsDirectory}
	case entry.Type != docker.EntryFile:
		return nil, &sandbox.NotRegularError{Path: userPath, Kind: fileStat("", entry).Kind}
	}
	return body, nil
}

// isProtocolError reports errors the protocol itself defines, which pass through unwrapped.
func isProtocolError(err error) bool {
	return errors.Is(err, sandbox.ErrInvalid) || errors.Is(err, sandbox.ErrOS) || errors.Is(err, sandbox.ErrOutput)
}

func (a *containerActor) write(ctx context.Context, m *writeRequest) error {
	if _, err := paths.CheckWrite(m.Path, paths.Normalize(a.workingDir(m.WorkDir))); err != nil {
		return err // before any freeze: a path spelled as a directory, too long, with a NUL
	}
	target, abs, wd, err := a.locate(m.InstanceID, m.Path, m.WorkDir, "write over")
	if err != nil {
		return err
	}
	return a.onPlane(ctx, "write", target, func(ctx context.Context, p filePlane) error {
		return p.write(ctx, target, m.Path, abs, wd, m.Content)
	})
}

// archiveWrite is write on the archive plane: the walk and one archive under one freeze,
// staged (container_write.go).
func (a *containerActor) archiveWrite(ctx context.Context, target, userPath, abs, wd string, content []byte) error {
	f := a.facts
	uid, gid := 0, 0
	if f != nil {
		uid, gid = f.uid, f.gid
	}
	// Staged unless the instance cannot remove the staging name afterwards (see
	// container_write.go): then in place, as the archive plane alone writes.
	staging, err := a.stagingFor(ctx, target, abs)
	if err != nil {
		return err
	}
	sent := false
	err = a.frozen(ctx, target, func(ctx context.Context) error {
		present := map[string]bool{}
		memo := newKindMemo()
		memo.prefetch(ctx, a.b.engine, target, paths.Prefixes(abs))
		stat := a.guestStat(target, memo, func(p string, e *docker.Entry) {
			if e.Type == docker.EntryDir {
				present[p] = true
			}
		})
		if _, err := paths.ResolveWrite(ctx, stat, userPath, wd); err != nil {
			return err
		}
		// Only missing directories travel, from the working directory down, each stamped with
		// the guest's identity: an entry for an existing one would re-stamp its mode, and one
		// Docker made implicitly would be root's.
		var entries []docker.TarEntry
		for _, d := range paths.Prefixes(parentOf(abs)) {
			if _, inside := paths.RelativeTo(d, wd); inside && !present[d] {
				entries = append(entries, docker.DirEntry(d, 0o755, uid, gid))
			}
		}
		if staging == "" {
			entries = append(entries, docker.FileEntry(abs, content, 0o644, uid, gid))
		} else {
			entries = append(entries, docker.FileEntry(staging, content, 0o644, uid, gid),
				docker.LinkEntry(abs, staging, 0o644, uid, gid))
		}
		tarball, err := docker.BuildTar(entries...)
		if err != nil {
			return err
		}
		sent = true
		if err := a.b.engine.CopyIn(ctx, target, tarball); err != nil {
			return fmt.Errorf("docker could not write %s: %w", userPath, err)
		}
		return nil
	})
	if staging != "" && sent {
		// Thawed: the staging name goes whether the archive landed or not.
		return a.dropStaging(ctx, target, wd, userPath, staging, err)
	}
	return err
}

func parentOf(abs string) string {
	for i := len(abs) - 1; i > 0; i-- {
		if abs[i] == '/' {
			return abs[:i]
		}
	}
	return "/"
}

// prepareWorkDir ensures the storage base exists. The check writes nothing and needs no
// freeze; only creating missing components does, and then the walk is repeated frozen so the
// tar lands where the check looked. Ancestors are root's, the base the guest's.
//
// A container just created (memo set) has its image's files: what the walk found is its
// image's, remembered per image ID so the next fresh container of it sends the tar unwalked.
// With afterStart, a created container's missing base is not sent but reported (late), for
// makeBaseStarted to make once the container runs.
func (a *containerActor) prepareWorkDir(ctx context.Context, info *docker.ContainerInfo, base string, f *facts, memo *statMemo, afterStart bool) (late bool, _ error) {
	if paths.Normalize(base) == "/" {
		return false, nil
	}
	target := info.ID
	check := memo
	if check == nil {
		check = newKindMemo() // warm: the check decides on kinds alone
	}
	missing, known := []string(nil), false
	if memo != nil {
		missing, known = a.b.images.missing(info.ImageID, base)
	}
	if !known {
		var err error
		if missing, err = a.missingBase(ctx, target, base, check); err != nil {
			return false, err
		}
		if memo != nil {
			a.b.images.setMissing(info.ImageID, base, missing)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	if memo != nil && afterStart {
		return true, nil
	}
	if memo != nil {
		// Not started: no guest process, nothing to freeze.
		return false, a.createBase(ctx, target, base, missing, f)
	}
	if a.execsStarting() {
		// A freeze now could race an exec's start (see handle); the base went missing under
		// running commands, which only the guest can have done.
		return false, fmt.Errorf("storage base %s is missing while commands run in %s; retry when they end", base, a.name)
	}
	return false, a.frozen(ctx, target, func(ctx context.Context) error {
		missing, err := a.missingBase(ctx, target, base, newKindMemo())
		if err != nil || len(missing) == 0 {
			return err
		}
		return a.createBase(ctx, target, base, missing, f)
	})
}

// createBase sends the missing components of the base in one tar: ancestors root's, the base
// the guest's (root's when the identity is unresolved).
func (a *containerActor) createBase(ctx context.Context, target, base string, missing []string, f *facts) error {
	uid, gid := 0, 0
	if f.resolved {
		uid, gid = f.uid, f.gid
	}
	entries := docker.DirChain(missing, uid, gid)
	if a.execChan.install { // before start: the exec supervisor rides in the same archive put
		entries = append(entries, a.supervisorEntries(target)...)
		a.execChan.install = false
	}
	tarball, err := docker.BuildTar(entries...)
	if err == nil {
		err = a.b.engine.CopyIn(ctx, target, tarball)
	}
	if err != nil {
		return fmt.Errorf("docker could not create the working directory %s: %w", base, err)
	}
	return nil
}

// missingBase walks the base's components from the top: a link or non-directory fails, an
// absent one and everything below it is missing.
func (a *containerActor) missingBase(ctx context.Context, target, base string, memo *statMemo) ([]string, error) {
	comps := paths.Prefixes(base)
	memo.prefetch(ctx, a.b.engine, target, comps)
	for i, c := range comps {
		e, err := memo.stat(ctx, a.b.engine, target, c)
		if err != nil {
			return nil, fmt.Errorf("storage base component %s is unreadable: %w", c, err)
		}
		switch {
		case e == nil:
			return comps[i:], nil
		case e.Type == docker.EntrySymlink:
			return nil, &sandbox.NotConfinedError{Path: c, WorkDir: base, Reason: c + " is a link rather than a real directory"}
		case e.Type != docker.EntryDir:
			return nil, &sandbox.NotDirectoryError{Path: c}
		}
	}
	return nil, nil
}
