package actors

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Processes (docs/architecture.md, "Processes"): in a sandbox whose first process is the
// engine's supervisor, the supervisor owns each process the engine starts; it keeps it running
// and holds its output whatever becomes of the engine, and any engine that reaches the sandbox
// later follows it again by its ID and sequence. Where there is no supervisor (an image with
// its own entrypoint, a daemon the host plane cannot reach) a process is a docker exec the
// engine follows itself (process_docker.go). Every call asks the container actor for the
// route only; the call itself runs on the caller's goroutine, so a process call never holds
// the mailbox.

var _ sandbox.ProcessRunner = (*Sandbox)(nil)

// processRouteRequest asks the actor how to reach the instance's processes: its supervisor's
// proven root, when it has one, and the working directory a start resolves.
type processRouteRequest struct {
	InstanceID string
	WorkDir    string
	Resolve    bool // resolve WorkDir (a start)
}

type processRouteResponse struct {
	Target string
	Route  *channelRoute // nil: no supervisor, processes are docker execs
	Dir    string
	Err    error
}

func (*processRouteRequest) needsFreeze() bool  { return false }
func (*processRouteRequest) fail(err error) any { return &processRouteResponse{Err: err} }

func (m *processRouteRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	target, err := a.target(m.InstanceID)
	if err != nil {
		reply(&processRouteResponse{Err: err})
		return
	}
	res := &processRouteResponse{Target: target}
	if m.Resolve {
		if err := paths.CheckGrammar(m.WorkDir); err != nil {
			reply(&processRouteResponse{Err: err})
			return
		}
		res.Dir = a.workingDir(m.WorkDir)
		if err := paths.CheckGrammar(res.Dir); err != nil {
			reply(&processRouteResponse{Err: err})
			return
		}
	}
	res.Route = a.execChannel(ctx, target)
	reply(res)
}

func (s *Sandbox) processRoute(ctx context.Context, wd string, resolve bool) (*processRouteResponse, error) {
	res, err := ask[*processRouteResponse](ctx, s.b, s.name, s.pid, s.envelope(&processRouteRequest{InstanceID: s.inst().id, WorkDir: wd, Resolve: resolve}), 0)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

// newProcessID is an ID for a process whose start named none.
func newProcessID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "p-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// StartProcess implements [sandbox.ProcessRunner]: on the sandbox's supervisor when it has
// one (the process is durable), else as a docker exec the engine follows. A spec with a User
// takes docker exec too: the supervisor runs as the container's user and switches to no other.
func (s *Sandbox) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.Process, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.Process{}, err
	}
	if err := checkExecText(spec.Command); err != nil {
		return sandbox.Process{}, err
	}
	if spec.ID == "" {
		spec.ID = newProcessID()
	}
	held, err := s.b.held(spec.Retention)
	if err != nil {
		return sandbox.Process{}, err
	}
	if err := s.b.checkRetention(spec.Retention); err != nil {
		return sandbox.Process{}, err
	}
	argv := spec.Command.Argv
	if spec.Command.Shell != "" {
		argv = []string{"sh", "-c", spec.Command.Shell}
	}
	route, err := s.processRoute(ctx, spec.WorkDir, true)
	if err != nil {
		return sandbox.Process{}, err
	}
	if err := checkExecSize(argv, route.Dir); err != nil {
		return sandbox.Process{}, err
	}
	if p, ok, err := s.b.procs.repeat(s.name, route.Target, spec, argv, route.Dir); ok || err != nil {
		return p, err
	}
	if route.Route == nil || spec.User != "" {
		return s.startDocker(ctx, route, spec, argv, held)
	}
	return s.startSupervised(ctx, route, spec, argv, held)
}

// startSupervised starts spec on the sandbox's supervisor; a supervisor that cannot be
// reached before anything was sent makes the process a docker exec, as it does a command.
func (s *Sandbox) startSupervised(ctx context.Context, route *processRouteResponse, spec sandbox.ProcessSpec, argv []string, held int64) (sandbox.Process, error) {
	req := execwire.StartRequest{ID: spec.ID, Argv: argv, Dir: route.Dir, Env: spec.Env, Stdin: spec.Stdin,
		TimeoutMS: spec.Timeout.Milliseconds(), Buffer: held, MaxProcesses: s.b.procLimits.MaxProcesses}
	if r := spec.Retention; r != nil {
		req.Retention = &execwire.Retention{Bytes: r.Bytes, AgeMS: r.Age.Milliseconds()}
	}
	if s.b.procStore != nil {
		req.HoldMS = followHold.Milliseconds() // the pump follows at once: nothing is dropped before it attaches
	}
	if spec.Timeout > 0 && req.TimeoutMS == 0 {
		req.TimeoutMS = 1
	}
	if spec.Terminal != nil {
		req.TTY = &execwire.Size{Rows: spec.Terminal.Rows, Cols: spec.Terminal.Cols}
	}
	rep, err := channelCall(ctx, s.name, route.Route, execwire.CallRequest{Op: execwire.OpStart, Start: &req})
	if errors.Is(err, ErrExecChannelUnproven) {
		noChannel := *route
		noChannel.Route = nil
		return s.startDocker(ctx, &noChannel, spec, argv, held)
	}
	if err != nil {
		return sandbox.Process{}, err
	}
	if rep.Error != nil {
		return sandbox.Process{}, callError(spec.ID, rep, s.b.procLimits)
	}
	if rep.Process == nil {
		return sandbox.Process{}, &ExecChannelError{Container: s.name, Err: fmt.Errorf("a start answered no process")}
	}
	p := processFromWire(*rep.Process)
	s.b.reportStarted(ctx, s, p)
	if s.b.procStore != nil {
		s.b.follow(s, s.ProcessRef(p.ID), p, p.Retention, nil)
	}
	s.b.waitEnd(s, p.ID)
	return p, nil
}

// followHold is how long a supervisor holds a new process's output back for the pump that is
// about to follow it, should the pump not attach (the engine stopped meanwhile).
const followHold = 10 * time.Second

// checkRetention refuses a process retention above the store's own (without a store, the
// buffer's bound, [ProcessLimits.held], is the retention).
func (b *Backend) checkRetention(r *sandbox.OutputRetention) error {
	if r == nil || b.procStore == nil {
		return nil
	}
	most := b.procStore.Retention()
	switch {
	case most.Bytes > 0 && r.Bytes > most.Bytes:
		return &sandbox.ProcessLimitError{Limit: "retention_bytes", Max: most.Bytes, Asked: r.Bytes}
	case most.Age > 0 && r.Age > most.Age:
		return &sandbox.ProcessLimitError{Limit: "retention_age", Max: most.Age.Milliseconds(), Asked: r.Age.Milliseconds()}
	}
	return nil
}

// held is how much of a process's output its supervisor holds: without a store, the
// process's retention when it names bytes (at most [MaxProcessHeld], above which it is
// refused), else the backend's.
func (b *Backend) held(r *sandbox.OutputRetention) (int64, error) {
	l := b.procLimits
	if r == nil || r.Bytes == 0 || b.procStore != nil {
		return l.Held, nil // with a store, the retention is the store's to keep
	}
	if r.Bytes > MaxProcessHeld {
		return 0, &sandbox.ProcessLimitError{Limit: "retention_bytes", Max: MaxProcessHeld, Asked: r.Bytes}
	}
	return r.Bytes, nil
}

// ListProcesses implements [sandbox.ProcessRunner]: the supervisor's processes, then those
// run through docker exec, each in start order.
func (s *Sandbox) ListProcesses(ctx context.Context) ([]sandbox.Process, error) {
	route, err := s.processRoute(ctx, "", false)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Process
	if route.Route != nil {
		rep, err := channelCall(ctx, s.name, route.Route, execwire.CallRequest{Op: execwire.OpList})
		if err != nil && !errors.Is(err, ErrExecChannelUnproven) {
			return nil, err
		}
		for _, p := range rep.Processes {
			out = append(out, processFromWire(p))
		}
	}
	out = append(out, s.b.procs.list(s.name, route.Target)...)
	s.b.watchListed(s, out)
	return s.followListed(ctx, out)
}

// onProcess routes a call on id: to the docker exec the engine follows under that ID, else
// to the supervisor; without either the process is unknown.
func (s *Sandbox) onProcess(ctx context.Context, id string) (*dockerProc, *processRouteResponse, error) {
	if err := sandbox.CheckProcessID(id); err != nil {
		return nil, nil, err
	}
	route, err := s.processRoute(ctx, "", false)
	if err != nil {
		return nil, nil, err
	}
	if p := s.b.procs.get(s.name, route.Target, id); p != nil {
		return p, route, nil
	}
	if route.Route == nil {
		return nil, nil, &sandbox.ProcessNotFoundError{ID: id}
	}
	return nil, route, nil
}

// ReadProcessOutput implements [sandbox.ProcessRunner], from the buffer that holds the
// output: the supervisor's, or the engine's for a docker exec.
func (s *Sandbox) ReadProcessOutput(ctx context.Context, id string, from int64, opts sandbox.ReadOptions) (sandbox.ProcessOutput, error) {
	if from < 0 || opts.MaxBytes < 0 || opts.Wait < 0 {
		return sandbox.ProcessOutput{}, &sandbox.InvalidArgumentError{Reason: "a read's sequence, size and wait are never negative"}
	}
	maxBytes := opts.MaxBytes
	if maxBytes == 0 {
		maxBytes = s.b.procLimits.ReadBytes
	}
	if s.b.procStore != nil {
		return s.readStored(ctx, id, from, sandbox.ReadOptions{MaxBytes: maxBytes, Wait: opts.Wait})
	}
	dp, route, err := s.onProcess(ctx, id)
	if err != nil {
		return sandbox.ProcessOutput{}, err
	}
	if dp != nil {
		return dp.read(ctx, from, maxBytes, opts.Wait)
	}
	return readChannel(ctx, s.name, route.Route, id, from, maxBytes, opts.Wait)
}

// readStored reads id's output from the store. Nothing stored under the ID is an unknown
// process only when neither the supervisor nor this engine runs one under it; one that runs
// and whose first record is not stored yet answers as a process with no output yet.
func (s *Sandbox) readStored(ctx context.Context, id string, from int64, opts sandbox.ReadOptions) (sandbox.ProcessOutput, error) {
	if err := sandbox.CheckProcessID(id); err != nil {
		return sandbox.ProcessOutput{}, err
	}
	store, ref := s.b.procStore, s.ProcessRef(id)
	out, err := store.ReadProcessOutput(ctx, ref, from, sandbox.ReadOptions{MaxBytes: opts.MaxBytes})
	if errors.As(err, new(*sandbox.ProcessNotFoundError)) {
		if err := s.processExists(ctx, id); err != nil {
			return sandbox.ProcessOutput{}, err
		}
		out, err = sandbox.ProcessOutput{Next: from}, nil
	}
	if err != nil || len(out.Chunks) > 0 || out.Cut != nil || out.Exit != nil || opts.Wait <= 0 {
		return out, err
	}
	out, err = store.ReadProcessOutput(ctx, ref, from, opts)
	if errors.As(err, new(*sandbox.ProcessNotFoundError)) {
		return sandbox.ProcessOutput{Next: from}, nil
	}
	return out, err
}

// processExists is nil when the supervisor or this engine runs a process under id.
func (s *Sandbox) processExists(ctx context.Context, id string) error {
	dp, route, err := s.onProcess(ctx, id)
	if err != nil || dp != nil {
		return err
	}
	rep, err := channelCall(ctx, s.name, route.Route, execwire.CallRequest{Op: execwire.OpList})
	if err != nil {
		return err
	}
	for _, p := range rep.Processes {
		if p.ID == id {
			return nil
		}
	}
	return &sandbox.ProcessNotFoundError{ID: id}
}

// WriteProcessStdin implements [sandbox.ProcessRunner].
func (s *Sandbox) WriteProcessStdin(ctx context.Context, id string, p []byte) error {
	if n := s.b.procLimits.MaxStdinBytes; len(p) > n {
		return &sandbox.ProcessLimitError{Limit: "stdin_bytes", Max: int64(n), Asked: int64(len(p))}
	}
	return s.processCall(ctx, id, execwire.CallRequest{Op: execwire.OpStdin, Data: p}, "stdin")
}

// CloseProcessStdin implements [sandbox.ProcessRunner].
func (s *Sandbox) CloseProcessStdin(ctx context.Context, id string) error {
	return s.processCall(ctx, id, execwire.CallRequest{Op: execwire.OpCloseStdin}, "stdin")
}

// ResizeProcess implements [sandbox.ProcessRunner].
func (s *Sandbox) ResizeProcess(ctx context.Context, id string, size sandbox.TerminalSize) error {
	if size.Rows == 0 || size.Cols == 0 {
		return &sandbox.InvalidArgumentError{Reason: "a terminal needs at least one row and one column"}
	}
	return s.processCall(ctx, id, execwire.CallRequest{Op: execwire.OpResize, Size: &execwire.Size{Rows: size.Rows, Cols: size.Cols}}, "a terminal")
}

// SignalProcess implements [sandbox.ProcessRunner].
func (s *Sandbox) SignalProcess(ctx context.Context, id string, sig sandbox.Signal) error {
	if sig < 1 || sig > sandbox.MaxSignal {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("signal %d is not from 1 to %d", sig, sandbox.MaxSignal)}
	}
	return s.processCall(ctx, id, execwire.CallRequest{Op: execwire.OpSignal, Signal: int(sig)}, "signals")
}

// processCall runs one call on id's supervisor; a docker exec takes none of them (what refuses
// it is named by what).
func (s *Sandbox) processCall(ctx context.Context, id string, req execwire.CallRequest, what string) error {
	dp, route, err := s.onProcess(ctx, id)
	if err != nil {
		return err
	}
	if dp != nil {
		return dp.refuse(what)
	}
	req.ID = id
	rep, err := channelCall(ctx, s.name, route.Route, req)
	if err != nil {
		return err
	}
	return callError(id, rep, s.b.procLimits)
}

// WaitProcess implements [sandbox.ProcessRunner].
func (s *Sandbox) WaitProcess(ctx context.Context, id string) (sandbox.Process, error) {
	dp, route, err := s.onProcess(ctx, id)
	if err != nil {
		return sandbox.Process{}, err
	}
	var p sandbox.Process
	if dp != nil {
		if p, err = dp.wait(ctx); err != nil {
			return p, err
		}
	} else {
		rep, err := channelCall(ctx, s.name, route.Route, execwire.CallRequest{Op: execwire.OpWait, ID: id})
		if err != nil {
			return sandbox.Process{}, err
		}
		if rep.Error != nil || rep.Process == nil {
			return sandbox.Process{}, callError(id, rep, s.b.procLimits)
		}
		p = processFromWire(*rep.Process)
	}
	// With a store, the end is its exit stored: a read after the wait reaches it.
	if s.b.procStore != nil {
		start := p
		start.State, start.Exit = sandbox.ProcessStateRunning, nil
		pm := s.b.follow(s, s.ProcessRef(id), start, p.Retention, dp)
		select {
		case <-pm.done:
		case <-ctx.Done():
			return sandbox.Process{}, fmt.Errorf("wait for process %s: %w", id, ctx.Err())
		}
	}
	return p, nil
}

// callError is the protocol's error for a supervisor's refusal; nil without one.
func callError(id string, rep execwire.CallReply, l ProcessLimits) error {
	e := rep.Error
	if e == nil {
		return nil
	}
	switch e.Code {
	case execwire.CodeNotFound:
		return &sandbox.ProcessNotFoundError{ID: id}
	case execwire.CodeExists:
		return &sandbox.ProcessExistsError{ID: id}
	case execwire.CodeLimit:
		return &sandbox.ProcessLimitError{Limit: "processes", Max: int64(l.MaxProcesses), Asked: int64(l.MaxProcesses) + 1}
	case execwire.CodeEnded:
		return &sandbox.ProcessEndedError{ID: id}
	case execwire.CodeStdinClosed:
		return &sandbox.StdinClosedError{ID: id, Reason: e.Message}
	case execwire.CodeStdinFull:
		return &sandbox.StdinClosedError{ID: id, Full: true, Written: rep.Written, Reason: e.Message}
	case execwire.CodeNotTTY:
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("process %q has no terminal to resize", id)}
	case execwire.CodeNotStarted:
		cause, err := sandbox.ParseStartFailure(e.Cause)
		if err != nil {
			cause = sandbox.StartRuntime
		}
		return &sandbox.ProcessStartError{ID: id, Cause: cause, Message: e.Message}
	}
	return &sandbox.InvalidArgumentError{Reason: "the supervisor refused the call: " + e.Message}
}

// processFromWire is a supervisor's record as the protocol states it.
func processFromWire(p execwire.Process) sandbox.Process {
	out := sandbox.Process{ID: p.ID, PID: p.PID, Argv: p.Argv, WorkDir: p.Dir, Stdin: p.Stdin, State: sandbox.ProcessStateRunning,
		StartedAt: time.UnixMilli(p.StartedAt).UTC(), Output: p.End, Transport: sandbox.TransportSupervisor, Durable: true, Created: p.Created}
	if p.TTY != nil {
		out.Terminal = &sandbox.TerminalSize{Rows: p.TTY.Rows, Cols: p.TTY.Cols}
	}
	if p.Exit != nil {
		exit := exitFromWire(*p.Exit)
		out.State, out.Exit = sandbox.ProcessStateExited, &exit
	}
	if r := p.Retention; r != nil {
		out.Retention = &sandbox.OutputRetention{Bytes: r.Bytes, Age: time.Duration(r.AgeMS) * time.Millisecond}
	}
	return out
}

func exitFromWire(e execwire.ProcessExit) sandbox.ProcessExit {
	return sandbox.ProcessExit{Reason: sandbox.ExitReason(e.Reason), ExitCode: e.Code, Signal: sandbox.Signal(e.Signal), At: time.UnixMilli(e.At).UTC()}
}

// endProcessesBudget bounds the disposal's wait for the supervisor to kill the sandbox's
// processes and record their ends.
const endProcessesBudget = 2 * time.Second

// endProcesses ends the processes of the instance (the container's current one when
// instance is "") before its disposal removes it, so that each is recorded as killed at
// disposal: the supervisor kills every running process and answers once each has ended; the
// docker exec processes end with the container and are marked for it.
func (a *containerActor) endProcesses(ctx context.Context, instance string) {
	a.b.procs.disposing(a.name)
	if a.b.execd == nil {
		return
	}
	if instance == "" {
		info, err := a.current(ctx)
		if err != nil || info == nil {
			return
		}
		instance = info.ID
	}
	route := a.execChannel(ctx, instance)
	if route == nil {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endProcessesBudget)
	defer cancel()
	if _, err := channelCall(ectx, a.name, route, execwire.CallRequest{Op: execwire.OpEndAll, Reason: execwire.ReasonDisposed}); err != nil {
		a.log.Info("the supervisor did not end the sandbox's processes before its disposal", zap.Error(err))
	}
	// Their ends are stored before the container goes, within the same budget.
	for _, p := range a.b.disposingPumps(instance) {
		select {
		case <-p.done:
		case <-ectx.Done():
			return
		}
	}
}
