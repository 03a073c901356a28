package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// Sandbox is the handle [Backend.Acquire] returns: every call is a message to the container
// actor, which addresses the instance this handle was acquired for (or reset to since).
type Sandbox struct {
	b    *Backend
	pid  *actor.PID
	name string
	key  sandbox.Key
	kind string
	spec sandbox.Spec // as acquired: what Reset makes again
	cur  atomic.Pointer[instance]
}

// instance is what the handle's acquire, or its last Reset, got under the name.
type instance struct {
	id      string
	workDir string
	created bool
	outcome string // how it was got (sandbox.Outcome…)
	imageID string
	bound   *binding // what the acquire bound, for an actor spawned since (passivate.go)
}

// newHandle is the handle of key's sandbox of spec under name, as res got it.
func (b *Backend) newHandle(pid *actor.PID, name string, key sandbox.Key, spec sandbox.Spec, res *acquireResponse, bound *binding) *Sandbox {
	s := &Sandbox{b: b, pid: pid, name: name, key: key, kind: spec.Kind, spec: spec.Clone()}
	s.cur.Store(&instance{id: res.InstanceID, workDir: res.WorkDir, created: res.Created, outcome: res.Outcome,
		imageID: res.ImageID, bound: bound})
	return s
}

func (s *Sandbox) inst() *instance { return s.cur.Load() }

var (
	_ sandbox.Sandbox       = (*Sandbox)(nil)
	_ sandbox.BoundedExec   = (*Sandbox)(nil)
	_ sandbox.StreamingExec = (*Sandbox)(nil)
	_ sandbox.Fresh         = (*Sandbox)(nil)
	_ sandbox.Acquired      = (*Sandbox)(nil)
)

// ContainerName is the derived container name.
func (s *Sandbox) ContainerName() string { return s.name }

// InstanceID is the engine's container ID.
func (s *Sandbox) InstanceID() string { return s.inst().id }

// WorkDir is the storage base the sandbox is bound to.
func (s *Sandbox) WorkDir() string { return s.inst().workDir }

// Created reports whether the acquire that returned this handle created the container.
func (s *Sandbox) Created() bool { return s.inst().created }

// AcquireOutcome says how the acquire that returned this handle got the instance: created,
// reused, restarted or adopted.
func (s *Sandbox) AcquireOutcome() string { return s.inst().outcome }

// ImageID is the daemon's ID of the image the instance runs.
func (s *Sandbox) ImageID() string { return s.inst().imageID }

// WriteFile writes content at path under one freeze; see [sandbox.Sandbox]. Content above
// [MaxBytesPerFile], the ceiling the backend declares, is refused with
// [*sandbox.TransferCapExceededError] before any of it moves.
func (s *Sandbox) WriteFile(ctx context.Context, path string, content []byte, wd string) error {
	start := time.Now()
	err := s.writeFile(ctx, path, content, wd)
	s.reportFile(ctx, start, sandbox.DirectionIn, path, content, err)
	return err
}

func (s *Sandbox) writeFile(ctx context.Context, path string, content []byte, wd string) error {
	if n := int64(len(content)); n > MaxBytesPerFile {
		return &sandbox.TransferCapExceededError{Path: path, Cap: "per-file cap", Limit: MaxBytesPerFile, Actual: n}
	}
	res, err := ask[*writeResponse](ctx, s.b, s.name, s.pid, s.envelope(&writeRequest{InstanceID: s.inst().id, Path: path, WorkDir: wd, Content: content}), 0)
	if err != nil {
		return err
	}
	return res.Err
}

// StatFile describes path without following it, under one freeze.
func (s *Sandbox) StatFile(ctx context.Context, path, wd string) (*sandbox.FileStat, error) {
	res, err := ask[*statResponse](ctx, s.b, s.name, s.pid, s.envelope(&statRequest{InstanceID: s.inst().id, Path: path, WorkDir: wd}), 0)
	if err != nil {
		return nil, err
	}
	return res.Stat, res.Err
}

// ReadFile returns a regular file's bytes, refusing above maxBytes, under one freeze. A file
// above [MaxBytesPerFile], the ceiling the backend declares, is refused whatever maxBytes
// says: [*sandbox.TransferCapExceededError] on the archive's header, before its body moves.
func (s *Sandbox) ReadFile(ctx context.Context, path, wd string, maxBytes int64) ([]byte, error) {
	start := time.Now()
	content, err := s.readFile(ctx, path, wd, maxBytes)
	s.reportFile(ctx, start, sandbox.DirectionOut, path, content, err)
	return content, err
}

func (s *Sandbox) readFile(ctx context.Context, path, wd string, maxBytes int64) ([]byte, error) {
	req := &readRequest{InstanceID: s.inst().id, Path: path, WorkDir: wd, MaxBytes: min(maxBytes, MaxBytesPerFile)}
	res, err := ask[*readResponse](ctx, s.b, s.name, s.pid, s.envelope(req), 0)
	if err != nil {
		return nil, err
	}
	var capErr *sandbox.TransferCapExceededError
	if maxBytes > MaxBytesPerFile && errors.As(res.Err, &capErr) && capErr.Limit == MaxBytesPerFile {
		capErr.Cap = "per-file cap" // the backend's ceiling refused it, not the caller's maxBytes
	}
	return res.Content, res.Err
}

// Exec runs cmd; its output is capped at [DefaultExecOutputLimit], whose overflow discards
// the sandbox like a timeout.
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	return s.exec(ctx, &execRequest{InstanceID: s.inst().id, Command: cmd, WorkDir: wd, Timeout: timeout}, nil)
}

// ExecBounded runs cmd with a combined output budget; overflow fails with
// [*sandbox.ExecOutputLimitExceededError] and no partial result.
func (s *Sandbox) ExecBounded(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, maxOutputBytes int64) (sandbox.ExecResult, error) {
	if maxOutputBytes <= 0 {
		return sandbox.ExecResult{}, &sandbox.InvalidArgumentError{Reason: "max output bytes must be a positive integer"}
	}
	return s.exec(ctx, &execRequest{InstanceID: s.inst().id, Command: cmd, WorkDir: wd, Timeout: timeout, MaxOutputBytes: maxOutputBytes}, nil)
}

// ExecStreaming implements [sandbox.StreamingExec]: Exec, or ExecBounded when maxOutputBytes
// is positive, that also hands emit each piece of output as the engine reads it. emit is
// called from one goroutine at a time and never after ExecStreaming returns, even when the
// call returns early on ctx while the command is still being stopped.
func (s *Sandbox) ExecStreaming(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, maxOutputBytes int64,
	emit func(stream string, p []byte)) (sandbox.ExecResult, error) {
	req := &execRequest{InstanceID: s.inst().id, Command: cmd, WorkDir: wd, Timeout: timeout, MaxOutputBytes: maxOutputBytes}
	if emit == nil {
		return s.exec(ctx, req, nil)
	}
	g := &emitGate{emit: emit}
	defer g.close()
	return s.exec(ctx, req, g.output)
}

// emitGate serialises a streaming exec's calls of emit and stops them once the call returned.
type emitGate struct {
	mu     sync.Mutex
	closed bool
	emit   func(stream string, p []byte)
}

func (g *emitGate) output(stream int, p []byte) {
	name := "stdout"
	if stream == docker.StreamStderr {
		name = "stderr"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.emit(name, p)
	}
}

func (g *emitGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// exec asks the actor to run req; output, when set, is handed the output as it is read.
func (s *Sandbox) exec(ctx context.Context, req *execRequest, output func(stream int, p []byte)) (sandbox.ExecResult, error) {
	start := time.Now()
	env := &request{msg: req, output: output, bound: s.inst().bound}
	var result sandbox.ExecResult
	res, err := ask[*execResponse](ctx, s.b, s.name, s.pid, env, max(req.Timeout, 0))
	if err == nil {
		result, err = res.Result, res.Err
	}
	s.reportExec(ctx, start, req.Command, result, err)
	return result, err
}

// Remove deletes path; absent is success.
func (s *Sandbox) Remove(ctx context.Context, path, wd string, recursive bool) error {
	res, err := ask[*removeResponse](ctx, s.b, s.name, s.pid, s.envelope(&removeRequest{InstanceID: s.inst().id, Path: path, WorkDir: wd, Recursive: recursive}), 0)
	if err != nil {
		return err
	}
	return res.Err
}

// Reclaim removes a framework-created directory below wd within timeout.
func (s *Sandbox) Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error {
	res, err := ask[*reclaimResponse](ctx, s.b, s.name, s.pid, s.envelope(&reclaimRequest{InstanceID: s.inst().id, Dir: dir, WorkDir: wd, Timeout: timeout}), max(timeout, 0))
	if err != nil {
		return err
	}
	return res.Err
}

// ListDir is refused: enumerating a directory through docker cp transfers its whole subtree,
// contents included.
func (s *Sandbox) ListDir(context.Context, string, string) ([]sandbox.FileStat, error) {
	return nil, &sandbox.UnsupportedError{Backend: BackendName, Op: "ListDir (files_list)",
		Reason: "enumerating a directory through docker cp transfers the whole subtree including file contents; declare literal output paths instead"}
}

// RunCode is refused: the image reference is opaque, so which interpreter it holds is unknown.
func (s *Sandbox) RunCode(ctx context.Context, code string, _ time.Duration) (sandbox.ExecResult, error) {
	err := &sandbox.UnsupportedError{Backend: BackendName, Op: "RunCode (run_code)",
		Reason: "the backend treats the image reference as opaque and cannot know which interpreter it holds; run the interpreter through Exec or register a backend that declares run_code"}
	if obs := s.b.reporter(ctx); obs != nil {
		a := sandbox.ExecFinished{Act: s.act(time.Now(), err), Form: sandbox.FormCode}
		_, a.CommandSHA256 = sandbox.CommandDigest(nil, code, sandbox.FormCode)
		obs.ExecFinished(ctx, a)
	}
	return sandbox.ExecResult{}, err
}

// Reset replaces the instance with a new one made as the handle's acquire made it, from the
// image its spec names (a restored sandbox's spec names its snapshot's): files and processes
// are back at that baseline, memory is not kept. The key and kind keep addressing it; the
// instance ID changes. It is a restore whose snapshot is the spec's own image (snapshot.go:
// renew), so an engine killed part way leaves the previous instance or the new one, never
// neither.
func (s *Sandbox) Reset(ctx context.Context, timeout time.Duration) error {
	began := time.Now()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	prev := s.inst()
	next, err := s.b.renew(ctx, s.key, s.spec, prev.id)
	if err == nil {
		n := next.inst()
		s.cur.Store(&instance{id: n.id, workDir: n.workDir, outcome: sandbox.OutcomeReset, imageID: n.imageID, bound: n.bound})
	}
	if obs := s.b.reporter(ctx); obs != nil {
		obs.SandboxReset(ctx, sandbox.SandboxReset{Act: s.act(began, err), Previous: prev.id, Reason: sandbox.ActReason(ctx)})
	}
	if err != nil {
		return fmt.Errorf("reset %s: %w", s.name, err)
	}
	return nil
}

// envelope wraps a call of this handle with the binding of its acquire.
func (s *Sandbox) envelope(msg containerRequest) *request {
	return &request{msg: msg, bound: s.inst().bound}
}
