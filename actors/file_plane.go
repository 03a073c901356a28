package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors/hostfs"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// FilePlane names how file calls reach a container's filesystem.
type FilePlane string

// The file planes. The archive plane is the engine's archive API under a freeze (freeze.go);
// the host plane is actors/hostfs, openat2 beneath the container process's root, with no
// freeze. Auto takes the host plane for a container it can be proven for, else the archive.
const (
	FilePlaneAuto    FilePlane = "auto"
	FilePlaneArchive FilePlane = "archive"
	FilePlaneHost    FilePlane = "host"
)

// FilePlaneEnv is the variable cmd/engine and the test fixtures read the plane from
// (MAF_SANDBOX_FILE_PLANE=archive|host|auto); nothing in this package reads it.
const FilePlaneEnv = "MAF_SANDBOX_FILE_PLANE"

// ParseFilePlane reads a plane name; "" is auto.
func ParseFilePlane(s string) (FilePlane, error) {
	switch p := FilePlane(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return FilePlaneAuto, nil
	case FilePlaneAuto, FilePlaneArchive, FilePlaneHost:
		return p, nil
	}
	return "", fmt.Errorf("file plane %q: want archive, host or auto", s)
}

// WithFilePlane chooses the file plane (default [FilePlaneAuto]). [FilePlaneHost] forces the
// host plane: a file call on a container it cannot be proven for fails rather than falling
// back.
func WithFilePlane(p FilePlane) Option {
	return func(o *options) error {
		if _, err := ParseFilePlane(string(p)); err != nil {
			return err
		}
		o.filePlane = p
		return nil
	}
}

// filePlane is how one container's file calls reach its filesystem: the string checks
// (locate) are made before, identically for every plane.
type filePlane interface {
	name() string
	stat(ctx context.Context, target, p, abs, wd string) (*sandbox.FileStat, error)
	read(ctx context.Context, target, p, abs, wd string, maxBytes int64) ([]byte, error)
	write(ctx context.Context, target, p, abs, wd string, content []byte) error
	remove(ctx context.Context, target string, r removal) error
}

// archivePlane is the archive API under a freeze: the members of container_files.go,
// container_write.go and container_remove.go, unchanged.
type archivePlane struct{ a *containerActor }

func (archivePlane) name() string { return string(FilePlaneArchive) }
func (p archivePlane) stat(ctx context.Context, target, path, abs, wd string) (*sandbox.FileStat, error) {
	return p.a.archiveStat(ctx, target, path, abs, wd)
}
func (p archivePlane) read(ctx context.Context, target, path, abs, wd string, maxBytes int64) ([]byte, error) {
	return p.a.archiveRead(ctx, target, path, abs, wd, maxBytes)
}
func (p archivePlane) write(ctx context.Context, target, path, abs, wd string, content []byte) error {
	return p.a.archiveWrite(ctx, target, path, abs, wd, content)
}
func (p archivePlane) remove(ctx context.Context, target string, r removal) error {
	return p.a.archiveRemove(ctx, target, r)
}

// hostPlane is actors/hostfs on a root proven for this instance.
type hostPlane struct {
	a    *containerActor
	root *hostfs.Root
}

func (hostPlane) name() string { return string(FilePlaneHost) }
func (p hostPlane) stat(ctx context.Context, _, path, _, wd string) (*sandbox.FileStat, error) {
	return p.root.Stat(ctx, path, wd)
}
func (p hostPlane) read(ctx context.Context, _, path, _, wd string, maxBytes int64) ([]byte, error) {
	return p.root.Read(ctx, path, wd, maxBytes)
}
func (p hostPlane) write(ctx context.Context, _, path, _, wd string, content []byte) error {
	var o hostfs.Owner
	if f := p.a.facts; f != nil {
		o = hostfs.Owner{UID: f.uid, GID: f.gid}
	}
	return p.root.Write(ctx, path, wd, content, o)
}
func (p hostPlane) remove(ctx context.Context, target string, r removal) error {
	f := p.a.facts
	if f == nil || !f.resolved || r.guestFirst {
		// The guest's authority is what a removal may run with: unknown, rm by exec decides.
		// A staging name exists only on the archive plane.
		return p.a.archiveRemove(ctx, target, r)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err := p.root.Remove(ctx, hostfs.Removal{Op: r.op, Shown: r.shown, Abs: r.abs, WorkDir: r.wd, Recursive: r.recursive,
		Guest: hostfs.Cred{UID: f.uid, GID: f.gid, NoCaps: f.capsDropped}})
	return asTimeout(ctx, r, err)
}

// hostState is what the backend learnt of the host plane: checked once, on the first file
// call that could use it.
type hostState struct {
	mu   sync.Mutex
	done bool
	err  error // nil: the host plane may be tried for each container
}

// hostAvailable reports whether this engine can use the host plane at all: the daemon is on
// this host's unix socket, the engine runs as root, and the daemon is neither rootless nor
// user-namespace-remapped (its guest uids would not be the host's, and its containers'
// processes not ours to reach).
func (b *Backend) hostAvailable(ctx context.Context) error {
	b.host.mu.Lock()
	defer b.host.mu.Unlock()
	if b.host.done {
		return b.host.err
	}
	err, final := b.checkHost(ctx)
	if final {
		b.host.done, b.host.err = true, err
		b.log.Info("host file plane", zap.String("mode", string(b.filePlane)), zap.Bool("available", err == nil), zap.Error(err))
	}
	return err
}

func (b *Backend) checkHost(ctx context.Context) (err error, final bool) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: the engine does not run as root", hostfs.ErrUnavailable), true
	}
	bnd, err := b.engine.Bind(ctx)
	if err != nil {
		return err, false
	}
	if !strings.HasPrefix(bnd.Endpoint, "unix://") {
		return fmt.Errorf("%w: the daemon is at %s, not on this host's socket", hostfs.ErrUnavailable, bnd.Endpoint), true
	}
	opts, err := b.engine.SecurityOptions(ctx)
	if err != nil {
		return err, false
	}
	for _, o := range opts {
		for kv := range strings.SplitSeq(o, ",") {
			if kv == "name=userns" || kv == "name=rootless" {
				return fmt.Errorf("%w: the daemon runs with %s", hostfs.ErrUnavailable, kv), true
			}
		}
	}
	return nil, true
}

// plane is the file plane for target's next call. The host plane's root is proven once per
// instance and process; a root whose process ended (the container stopped or restarted) is
// proven again for the new process, and in auto mode a container that cannot be proven
// uses the archive plane until it is replaced.
func (a *containerActor) plane(ctx context.Context, target string) (filePlane, error) {
	mode := a.b.filePlane
	if mode == FilePlaneArchive {
		return archivePlane{a}, nil
	}
	if r := a.host; r != nil {
		if r.ID() == target && r.Alive() {
			return hostPlane{a, r}, nil
		}
		a.dropHost()
	}
	if mode == FilePlaneAuto && a.hostRefused == target {
		return a.archiveNow()
	}
	r, err := a.attachHost(ctx, target)
	if err == nil {
		a.host = r
		a.log.Info("file plane", zap.String("file_plane", string(FilePlaneHost)), zap.Int("pid", r.Pid()))
		return hostPlane{a, r}, nil
	}
	if mode == FilePlaneHost || !errors.Is(err, hostfs.ErrUnavailable) && !errors.Is(err, hostfs.ErrStale) {
		return nil, fmt.Errorf("host file plane for %s: %w", a.name, err)
	}
	a.hostRefused = target
	a.log.Info("file plane", zap.String("file_plane", string(FilePlaneArchive)), zap.String("host_refused", err.Error()))
	return a.archiveNow()
}

// onPlane runs do on target's plane for op, in a span (SpanFilePrefix+op, child of ctx's)
// that names the plane chosen; do gets the context that carries it.
func (a *containerActor) onPlane(ctx context.Context, op, target string, do func(ctx context.Context, p filePlane) error) (err error) {
	ctx, end := a.span(ctx, SpanFilePrefix+op)
	defer func() { end(err) }()
	p, err := a.plane(ctx, target)
	if err != nil {
		return err
	}
	trace.SpanFromContext(ctx).SetAttributes(KeyFilePlane.String(p.name()))
	return do(ctx, p)
}

// archiveNow is the archive plane for a call admitted as the host plane's (mayFreeze), whose
// process ended in between: while an exec of this actor starts it must not freeze (a freeze
// racing an exec's start wedges the container), so it is refused, to be retried.
func (a *containerActor) archiveNow() (filePlane, error) {
	if a.execsStarting() {
		return nil, fmt.Errorf("the host file plane of %s was lost while a command was starting; retry the call", a.name)
	}
	return archivePlane{a}, nil
}

// mayFreeze reports whether m may freeze the container, and so must wait while an exec of
// this actor starts (freeze.go's stash rule): a file call on a container whose host plane is
// proven and alive never freezes.
func (a *containerActor) mayFreeze(m containerRequest) bool {
	switch m.(type) {
	case *pauseRequest, *snapshotRequest: // sleep.go, snapshot.go: not a file call's pause, but one that races an exec's start alike
		return true
	}
	return m.needsFreeze() && (a.host == nil || !a.host.Alive())
}

// attachHost proves target's running process and opens the host plane on it.
func (a *containerActor) attachHost(ctx context.Context, target string) (*hostfs.Root, error) {
	if err := a.b.hostAvailable(ctx); err != nil {
		return nil, err
	}
	inspect := func(ctx context.Context) (hostfs.Instance, error) {
		info, err := a.refresh(ctx)
		if err != nil {
			return hostfs.Instance{}, err
		}
		if info == nil {
			return hostfs.Instance{}, fmt.Errorf("%w: %s is gone", hostfs.ErrStale, a.name)
		}
		return hostfs.Instance{ID: info.ID, Running: info.Running, Pid: info.Pid, StartedAt: info.StartedAt}, nil
	}
	want, err := inspect(ctx)
	if err != nil {
		return nil, err
	}
	if want.ID != target {
		return nil, fmt.Errorf("%w: %s is now instance %.12s", hostfs.ErrStale, a.name, want.ID)
	}
	return hostfs.Attach(ctx, want, inspect)
}

// hostAtStart reports whether a container this acquire creates should get its storage base
// after its start, on the host plane: the backend may use that plane (each container is still
// proven, by makeBaseStarted).
func (a *containerActor) hostAtStart(ctx context.Context) bool {
	return a.b.filePlane != FilePlaneArchive && a.b.hostAvailable(ctx) == nil
}

// makeBaseStarted makes the missing storage base of a container this acquire just started. On
// the host plane it is a mkdirat chain beneath the proven process's root, instead of the
// archive sent to the created container, which costs the daemon a mount and an unmount of the
// container's filesystem (0.4-0.8 s of a cold acquire on this machine's fuse-overlayfs). The
// base's rules are the archive's: its components were checked on the created container, the
// ancestors are root's, the base the guest's, and a link or file a guest's entrypoint put on
// the way meanwhile is refused, not followed. A container the plane cannot be proven for in
// auto mode gets it on the archive plane under a freeze, as a running one whose base went
// missing does.
func (a *containerActor) makeBaseStarted(ctx context.Context, info *docker.ContainerInfo, base string, f *facts) error {
	p, err := a.plane(ctx, info.ID)
	if err != nil {
		return err
	}
	hp, ok := p.(hostPlane)
	if !ok {
		_, err := a.prepareWorkDir(ctx, info, base, f, nil, false)
		return err
	}
	var o hostfs.Owner
	if f.resolved {
		o = hostfs.Owner{UID: f.uid, GID: f.gid}
	}
	if err := hp.root.MakeBase(ctx, base, o); err != nil {
		return fmt.Errorf("could not create the working directory %s: %w", base, err)
	}
	return nil
}

// dropHost closes the host plane's root, if any.
func (a *containerActor) dropHost() {
	if a.host != nil {
		_ = a.host.Close()
		a.host = nil
	}
}

// FilePlane reports the plane file calls take by default on this backend: archive when asked
// for, host when this engine can use it (each container is still proven on its first call),
// else archive with the reason the host plane is out.
func (b *Backend) FilePlane(ctx context.Context) (FilePlane, error) {
	if b.filePlane == FilePlaneArchive {
		return FilePlaneArchive, nil
	}
	if err := b.hostAvailable(ctx); err != nil {
		return FilePlaneArchive, err
	}
	return FilePlaneHost, nil
}
