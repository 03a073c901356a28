package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/actors/hostfs"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// The exec channel (docs/architecture.md, "The exec channel"): a closed sandbox whose image
// has no entrypoint of its own runs the engine's supervisor (cmd/execd) as its first process,
// and a command reaches it through the proven process's root instead of docker exec. docker
// exec stays the path whenever the channel cannot be proved before the command is sent.

// WithExecChannel gives the backend the supervisor binary (cmd/execd, static, for the
// daemon's platform) that it copies into every closed sandbox it creates from an image
// without an entrypoint (default: none, every command goes through docker exec). A binary
// that does not speak this engine's protocol ([execwire.Version]) is refused.
func WithExecChannel(binary []byte) Option {
	return func(o *options) error {
		if len(binary) == 0 {
			o.execd = nil
			return nil
		}
		if !bytes.Contains(binary, []byte(execwire.Version)) {
			return fmt.Errorf("exec channel: the supervisor binary does not speak %s", execwire.Version)
		}
		o.execd = slices.Clone(binary)
		return nil
	}
}

// channelRoots are the processes the channel's supervisors started for this backend's
// commands and whose commands have not ended, by container: their pids as the container sees
// them. A sweep of leftovers (hosttools) spares them as it spares what docker exec started,
// whose roots it knows by their parent outside the container; a channel command's parent is
// the supervisor, PID 1, like a detached leftover's.
type channelRoots struct {
	mu   sync.Mutex
	live map[string]map[int]int // container name → pid → commands (a pid is counted, not assumed unique)
}

func (r *channelRoots) add(container string, pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]map[int]int{}
	}
	if r.live[container] == nil {
		r.live[container] = map[int]int{}
	}
	r.live[container][pid]++
}

func (r *channelRoots) remove(container string, pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live[container][pid]--; r.live[container][pid] <= 0 {
		delete(r.live[container], pid)
	}
	if len(r.live[container]) == 0 {
		delete(r.live, container)
	}
}

func (r *channelRoots) list(container string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.live[container]))
}

// LiveExecRoots are the pids, in the sandbox's own namespace, of the commands this backend's
// exec channel is running in it now (none when its commands take docker exec). A leftover
// sweep that runs beside them spares their process trees.
func (s *Sandbox) LiveExecRoots() []int { return s.b.channelRoots.list(s.name) }

// execPaths counts the commands sent on each path, so a measurement can say which it timed.
type execPaths struct{ channel, docker atomic.Int64 }

// ExecPaths reports how many commands this backend sent through the exec channel and how many
// through docker exec (the fallback included) since it was created.
func (b *Backend) ExecPaths() (channel, dockerExec int64) {
	return b.execPaths.channel.Load(), b.execPaths.docker.Load()
}

// Bounds of the channel's own steps; the command's time is the caller's timeout.
const (
	execHelloBudget = 2 * time.Second        // the supervisor greets as it accepts
	execKillBudget  = 100 * time.Millisecond // writing the Kill frame before the connection is closed
	execFrameLimit  = 1 << 20                // the supervisor sends output in 32 KiB frames
	// execListenPatience bounds the wait for the socket of a supervisor that has not answered
	// yet: it listens within milliseconds of the container's start on a quiet host.
	execListenPatience = time.Second
)

// execChannelState is what a container actor knows of its channel.
type execChannelState struct {
	// root is the process the channel was proven for. It is never closed by the actor: an
	// exec's goroutine may still use it, and its descriptor is released by the runtime once
	// no one holds it (a Close would let the number be reused under that goroutine).
	root    *hostfs.Root
	refused string // the instance whose channel could not be proved: docker exec until it starts again
	install bool   // the container being created gets the supervisor (create → prepare)
	// waited: a command of this root has ended. Until then a missing socket is waited for a
	// little (execListenPatience): a sandbox's first command can come before its supervisor,
	// which starts with the container, listens. After it, a missing socket is final at once
	// (a supervisor that could not listen, or a guest that removed the socket).
	waited bool
}

// channelRoute is how one exec reaches the supervisor: the proven root, and how long a socket
// not there yet is waited for.
type channelRoute struct {
	root     *hostfs.Root
	patience time.Duration
}

// supervised reports whether info's first process is the supervisor: its entrypoint, or
// what the workload gate releases (its third argument, after the proxy and the token).
func supervised(info *docker.ContainerInfo) bool {
	if info == nil {
		return false
	}
	if slices.Equal(info.Entrypoint, []string{execwire.Binary}) {
		return true
	}
	return gatedRelease(info) != "" && info.Cmd[2] == execwire.Binary
}

// supervisorOpts are the create options that make the supervisor a new closed sandbox's
// first process, when the backend has it and the image runs no entrypoint of its own (one
// that does would no longer run): the supervisor as entrypoint and, as its ignored
// arguments, the command the container would have run.
func (a *containerActor) supervisorOpts(ctx context.Context, imageRef string) []docker.CreateOpt {
	a.execChan.install = false
	if a.b.execd == nil || a.egressBuild != nil {
		return nil
	}
	ep, ok, err := a.b.engine.ImageEntrypoint(ctx, imageRef)
	if err != nil || !ok || len(ep) > 0 {
		return nil
	}
	a.execChan.install = true
	return []docker.CreateOpt{docker.WithEntrypoint(execwire.Binary), docker.WithCmd(docker.KeepAlive()...)}
}

// installSupervisor copies the supervisor into a created container before its start.
func (a *containerActor) installSupervisor(ctx context.Context, id string) error {
	if !a.execChan.install {
		return nil
	}
	a.execChan.install = false
	tar, err := docker.BuildTar(a.supervisorEntries(id)...)
	if err == nil {
		err = a.b.engine.CopyIn(ctx, id, tar)
	}
	if err != nil {
		return fmt.Errorf("copy the exec supervisor into %s: %w", a.name, err)
	}
	return nil
}

// supervisorEntries are what a new sandbox gets for its supervisor: the binary and, when the
// container's user is not root, the directory of its socket, made here with mode 0700 and
// that user as owner. The supervisor runs as the container's user and cannot make a directory
// in a root it does not own; it makes and uses this one as a root supervisor makes and uses
// its own. The guest gains nothing by it: its user owns a directory it could have made under
// /tmp, and what the engine trusts of the socket in it is proven on every connection (no link
// followed, a socket, the proven pid at the other end), not read from the directory.
func (a *containerActor) supervisorEntries(id string) []docker.TarEntry {
	entries := []docker.TarEntry{docker.FileEntry(execwire.Binary, a.b.execd, 0o755, 0, 0)}
	if f := a.facts; f != nil && f.resolved && f.uid != 0 && strings.HasPrefix(a.factsKey, id+"|") {
		entries = append(entries, docker.DirEntry(execwire.SocketDir, 0o700, f.uid, f.gid))
	}
	return entries
}

// execChannel is the proven root of target's supervisor, nil when commands take docker exec:
// no supervisor binary, a container that does not run it, an engine without the host plane
// (remote, rootless or remapped daemon, not root), or a process that could not be proven.
// Proof is made once per instance and process, on the actor.
func (a *containerActor) execChannel(ctx context.Context, target string) *channelRoute {
	st := &a.execChan
	if a.b.execd == nil {
		return nil
	}
	if st.root != nil {
		if st.root.ID() == target && st.root.Alive() {
			return st.route()
		}
		st.root, st.waited = nil, false
	}
	if st.refused == target {
		return nil
	}
	st.refused = target
	if a.b.hostAvailable(ctx) != nil {
		return nil
	}
	info, err := a.current(ctx)
	if err != nil || info == nil || info.ID != target || !supervised(info) {
		return nil
	}
	root, err := a.attachHost(ctx, target)
	if err != nil {
		a.log.Info("exec channel not proven: docker exec", zap.Error(err))
		return nil
	}
	st.root, st.refused = root, ""
	return st.route()
}

func (st *execChannelState) route() *channelRoute {
	r := &channelRoute{root: st.root}
	if !st.waited {
		r.patience = execListenPatience
	}
	return r
}

// channelWaited records, on the actor, that an exec on route ended: the supervisor's first
// wait is spent.
func (a *containerActor) channelWaited(route *channelRoute) {
	if route != nil && route.root == a.execChan.root {
		a.execChan.waited = true
	}
}

// forgetExecChannel drops the channel's proof: the instance or its process changed.
func (a *containerActor) forgetExecChannel() {
	a.execChan.root, a.execChan.refused, a.execChan.waited = nil, "", false
}

// dialSupervisor connects to the supervisor's socket, waiting up to the route's patience for
// a socket that is not there yet or not listening yet; any other refusal is final.
func dialSupervisor(ctx context.Context, route *channelRoute) (*net.UnixConn, error) {
	deadline := time.Now().Add(route.patience)
	for {
		c, err := route.root.DialUnix(execwire.Socket)
		early := errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED)
		if err == nil || !early || !time.Now().Before(deadline) {
			return c, err
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// runOnChannel runs req through the supervisor of root. Until the Run frame is written every
// failure is [ErrExecChannelUnproven] (nothing was sent: the caller takes docker exec); after
// it, the outcome is the program's (its exit, or [*docker.ExecStartError] when it did not
// start), the caller's deadline (the context's error, after a Kill), the output budget
// ([*docker.OutputLimitError], after a Kill), or [*ExecChannelError]. The timeout and the
// budget are the engine's, kept from outside: it sends Kill and stops reading, and the
// supervisor kills the process group. A cancelled caller only closes: the command runs on.
func runOnChannel(ctx context.Context, container string, route *channelRoute, req docker.ExecRequest, started func(), roots *channelRoots) (docker.ExecOutput, error) {
	c, err := dialSupervisor(ctx, route)
	if err != nil {
		return docker.ExecOutput{}, fmt.Errorf("%w: %w", ErrExecChannelUnproven, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	_ = c.SetReadDeadline(time.Now().Add(execHelloBudget))
	typ, p, err := execwire.Read(c, len(execwire.Version))
	if err != nil || typ != execwire.Hello || string(p) != execwire.Version {
		return docker.ExecOutput{}, fmt.Errorf("%w: no %s greeting (%q, %v)", ErrExecChannelUnproven, execwire.Version, p, err)
	}
	run, err := execwire.EncodeRun(execwire.Request{Argv: req.Argv, Dir: req.WorkDir})
	if err != nil { // nothing was sent (the exec checked the size before: checkExecSize)
		return docker.ExecOutput{}, fmt.Errorf("%w: %w", ErrExecChannelUnproven, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	if ctx.Err() != nil {
		return docker.ExecOutput{}, fmt.Errorf("%w: %w", ErrExecChannelUnproven, ctx.Err())
	}
	if err := execwire.Write(c, execwire.Run, run); err != nil {
		// A partial write may have reached the supervisor: from here nothing is re-issued.
		return docker.ExecOutput{}, &ExecChannelError{Container: container, Err: err}
	}
	f := channelFollower{ctx: ctx, container: container, c: c, req: req, started: started, roots: roots}
	defer f.forget()
	return f.follow()
}

// channelFollower reads one command's frames after its Run.
type channelFollower struct {
	ctx       context.Context
	container string
	c         interface {
		Read([]byte) (int, error)
		Write([]byte) (int, error)
		SetWriteDeadline(time.Time) error
	}
	req     docker.ExecRequest
	started func()
	roots   *channelRoots
	pid     int // the command's, once Started named it
	out     docker.ExecOutput
	total   int64
}

// forget drops the command from the live roots: it ended, or the engine stopped following it
// (killed, or the channel broke; the sandbox is then discarded).
func (f *channelFollower) forget() {
	if f.pid > 0 {
		f.roots.remove(f.container, f.pid)
	}
}

func (f *channelFollower) follow() (docker.ExecOutput, error) {
	for {
		typ, p, err := execwire.Read(f.c, execFrameLimit)
		if err != nil {
			if f.ctx.Err() != nil {
				// The exec's own timeout kills (the sandbox is discarded after it too); a caller
				// that stopped waiting leaves the command running, as with docker exec.
				if errors.Is(context.Cause(f.ctx), errExecTimedOut) {
					f.kill()
				}
				return docker.ExecOutput{}, fmt.Errorf("exec in %s: %w", f.container, f.ctx.Err())
			}
			return docker.ExecOutput{}, &ExecChannelError{Container: f.container, Err: err}
		}
		switch typ {
		case execwire.Started:
			if pid, err := strconv.Atoi(string(p)); err == nil && pid > 1 && f.pid == 0 {
				f.pid = pid
				f.roots.add(f.container, pid)
			}
			if f.started != nil {
				f.started()
			}
		case execwire.NotStarted:
			return docker.ExecOutput{}, f.notStarted(p)
		case execwire.Stdout, execwire.Stderr:
			if err := f.output(typ, p); err != nil {
				f.kill()
				return docker.ExecOutput{}, err
			}
		case execwire.Exit:
			code, err := strconv.Atoi(string(p))
			if err != nil {
				return docker.ExecOutput{}, &ExecChannelError{Container: f.container, Err: fmt.Errorf("malformed exit %q", p)}
			}
			f.out.ExitCode = code
			return f.out, nil
		default:
			return docker.ExecOutput{}, &ExecChannelError{Container: f.container, Err: fmt.Errorf("unexpected frame %q", typ)}
		}
	}
}

// output keeps a piece of output within the budget (stdout and stderr together) and hands it
// to the caller's stream.
func (f *channelFollower) output(typ byte, p []byte) error {
	if limit := f.req.MaxOutputBytes; limit > 0 && f.total+int64(len(p)) > limit {
		return &docker.OutputLimitError{Limit: limit}
	}
	f.total += int64(len(p))
	stream := docker.StreamStdout
	if typ == execwire.Stdout {
		f.out.Stdout = append(f.out.Stdout, p...)
	} else {
		stream = docker.StreamStderr
		f.out.Stderr = append(f.out.Stderr, p...)
	}
	if f.req.Output != nil {
		f.req.Output(stream, p)
	}
	return nil
}

func (f *channelFollower) notStarted(p []byte) error {
	var sf execwire.StartFailure
	if err := json.Unmarshal(p, &sf); err != nil {
		return &ExecChannelError{Container: f.container, Err: fmt.Errorf("malformed start failure: %w", err)}
	}
	cause, err := sandbox.ParseStartFailure(sf.Cause)
	if err != nil {
		cause = sandbox.StartRuntime
	}
	return &docker.ExecStartError{Args: append([]string{"exec-channel"}, f.req.Argv...), Cause: cause, Message: sf.Message}
}

// kill asks the supervisor to kill the command's process group. Closing the connection does
// not: a caller that stops waiting leaves the command running, as with docker exec.
func (f *channelFollower) kill() {
	_ = f.c.SetWriteDeadline(time.Now().Add(execKillBudget))
	_ = execwire.Write(f.c, execwire.Kill, nil)
}
