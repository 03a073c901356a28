package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// execRequest asks to run Command in WorkDir within Timeout. A positive MaxOutputBytes caps
// stdout and stderr together.
type execRequest struct {
	InstanceID     string // the instance the caller acquired; a replaced one is refused
	Command        sandbox.Command
	WorkDir        string
	Timeout        time.Duration
	MaxOutputBytes int64
}

// execResponse carries the command's result.
type execResponse struct {
	Result sandbox.ExecResult
	Err    error
}

// needsFreeze is false: an exec never freezes; it is what a freeze waits for (freeze.go).
func (*execRequest) needsFreeze() bool  { return false }
func (*execRequest) fail(err error) any { return &execResponse{Err: err} }

func (m *execRequest) run(ctx context.Context, a *containerActor, actx actor.Context, env *request, reply func(any)) {
	a.adopt(env.bound)
	a.exec(actx, ctx, m, env.output, reply)
}

// DefaultExecOutputLimit caps a plain Exec's stdout and stderr together: an unbounded read
// of guest output is a host memory hazard. Going over it discards the sandbox like a timeout.
const DefaultExecOutputLimit = 8 * sandbox.MiB

// execDone is what an exec attempt's goroutine reports back to the actor.
type execDone struct {
	out docker.ExecOutput
	err error
}

// exec starts a command without blocking the mailbox: it runs on its own goroutine and
// finishes in a ReenterAfter continuation on the actor. No freeze of this actor overlaps it
// (see handle), so a "container is paused" refusal that outlasts the driver's short re-asking
// (docker.AskWhilePaused: 20.10's late "paused" events) is another party's pause and comes back as
// the daemon's answer, the ordinary result it is. output, when set, is
// handed to the driver, which calls it from the exec's goroutine as it reads.
func (a *containerActor) exec(actx actor.Context, ctx context.Context, m *execRequest, output func(int, []byte), reply func(any)) {
	target, err := a.target(m.InstanceID)
	if err == nil {
		err = m.Command.Validate()
	}
	if err == nil && m.Timeout <= 0 {
		err = &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("exec timeout must be positive, got %s", m.Timeout)}
	}
	if err == nil && m.MaxOutputBytes < 0 {
		err = &sandbox.InvalidArgumentError{Reason: "max output bytes must be a positive integer"}
	}
	if err == nil {
		err = checkExecText(m.Command)
	}
	if err == nil {
		err = paths.CheckGrammar(m.WorkDir)
	}
	if err == nil {
		err = paths.CheckGrammar(a.workingDir(m.WorkDir))
	}
	argv := m.Command.Argv
	if m.Command.Shell != "" {
		argv = []string{"sh", "-c", m.Command.Shell}
	}
	dir := a.workingDir(m.WorkDir) // on the actor: the goroutine below must not read its state
	if err == nil {
		err = checkExecSize(argv, dir)
	}
	if err != nil {
		reply(&execResponse{Err: err})
		return
	}
	limit := m.MaxOutputBytes
	if limit == 0 {
		limit = DefaultExecOutputLimit
	}
	deadline := time.Now().Add(m.Timeout)
	seq := a.beginExec() // a freeze waits for its start (freeze.go)
	f := actor.NewFuture(actx.ActorSystem(), -1)
	root, self := actx.ActorSystem().Root, actx.Self()
	sctx, end := a.span(ctx, SpanExec, semconv.ProcessExecutableName(argv[0]))
	channel, log := a.execChannel(ctx, target), a.log // exec_channel.go; nil: docker exec
	go func() {
		ectx, cancel := context.WithDeadlineCause(sctx, deadline, errExecTimedOut)
		defer cancel()
		stop := context.AfterFunc(a.b.life, cancel)
		defer stop()
		var once sync.Once
		started := func() { once.Do(func() { root.Send(self, &execStarted{seq: seq}) }) }
		req := docker.ExecRequest{Target: target, WorkDir: dir, Argv: argv, MaxOutputBytes: limit, Output: output}
		done := a.runExec(ectx, channel, log, req, started)
		endExec(sctx, end, &done)
		root.Send(f.PID(), &done)
	}()
	// Until the continuation runs the actor is not idle (passivate.go), and a stop answers
	// the caller in its place: a stopped actor never runs it.
	if a.tenure.execs == nil {
		a.tenure.execs = map[uint64]func(error){}
	}
	a.tenure.execs[seq] = func(err error) { reply(m.fail(err)) }
	actx.ReenterAfter(f, func(res any, err error) {
		if _, owed := a.tenure.execs[seq]; !owed {
			return // answered by the stop
		}
		delete(a.tenure.execs, seq)
		done, _ := res.(*execDone)
		if done == nil {
			done = &execDone{err: fmt.Errorf("exec result lost: %v", err)}
		}
		a.channelWaited(channel)
		r, err := a.finishExec(ctx, m, target, deadline, limit, done)
		reply(&execResponse{Result: r, Err: err})
		a.started(actx, seq) // an ended exec cannot be starting, whatever the driver said
		a.settle(actx)
	})
}

// runExec runs req on the exec channel when one is proven (exec_channel.go), and through the
// driver when there is none or it could not be proved before the command was sent. It runs on
// the exec's goroutine: it reads no actor state but the backend's.
func (a *containerActor) runExec(ctx context.Context, channel *channelRoute, log *zap.Logger, req docker.ExecRequest, started func()) execDone {
	var done execDone
	if channel != nil {
		cctx, end := a.span(ctx, SpanExecChannel)
		done.out, done.err = runOnChannel(cctx, a.name, channel, req, started, &a.b.channelRoots)
		end(done.err)
		if !errors.Is(done.err, ErrExecChannelUnproven) {
			a.b.execPaths.channel.Add(1)
			return done
		}
		log.Info("exec channel refused: docker exec", zap.Error(done.err))
	}
	a.b.execPaths.docker.Add(1)
	done.out, done.err = a.b.engine.ExecWithStart(ctx, req, started)
	return done
}

// endExec closes an exec's span with the command's exit code, or the driver's error.
func endExec(ctx context.Context, end func(error), d *execDone) {
	if d.err == nil {
		trace.SpanFromContext(ctx).SetAttributes(semconv.ProcessExitCode(d.out.ExitCode))
	}
	end(d.err)
}

// checkExecText refuses a command no exec could deliver: a NUL byte ends a C string, so an
// argv element or a shell string holding one cannot reach the program unaltered. Refused
// before any engine call, on every driver alike.
func checkExecText(cmd sandbox.Command) error {
	for i, arg := range cmd.Argv {
		if strings.IndexByte(arg, 0) >= 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("argv[%d] contains a NUL byte, which no program argument can hold", i)}
		}
	}
	if strings.IndexByte(cmd.Shell, 0) >= 0 {
		return &sandbox.InvalidArgumentError{Reason: "the shell string contains a NUL byte, which no program argument can hold"}
	}
	return nil
}

// checkExecSize refuses a command line longer than one exec carries: the exec channel's Run
// frame holds at most [execwire.MaxPayload] bytes of argv and working directory, encoded, and
// docker exec is held to the same bound, so that both paths refuse it alike before anything
// is sent (the daemon's own bound, its 4 MiB message to containerd, would come back as exit
// 126; the kernel's, 128 KiB an argument and a quarter of the stack in all, is lower still).
func checkExecSize(argv []string, dir string) error {
	_, err := execwire.EncodeRun(execwire.Request{Argv: argv, Dir: dir})
	var big *execwire.RequestTooLargeError
	if errors.As(err, &big) {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"the command line is %d bytes as an exec carries it (its arguments, or its shell string, and working directory, JSON-encoded), over the limit of %d bytes (4 MiB)",
			big.Size, execwire.MaxPayload)}
	}
	return err
}

// finishExec judges an exec's outcome on the actor: the caller's cancellation, the caller's
// timeout (which removes the container: no handle reaches the process inside), or the
// output cap (the plain cap discards the sandbox like a timeout).
func (a *containerActor) finishExec(ctx context.Context, m *execRequest, target string, deadline time.Time, limit int64, d *execDone) (sandbox.ExecResult, error) {
	var (
		limitErr *docker.OutputLimitError
		startErr *docker.ExecStartError
	)
	switch {
	case errors.As(d.err, &startErr):
		// Nothing ran: answered as docker exec answers, 126 or 127 with the runtime's words,
		// on stderr (never as the program's stdout), and the cause typed.
		return sandbox.NotStartedResult(startErr.Cause, startErr.Message), nil
	case d.err == nil && d.out.ExitCode != 0 && a.execGone(target, d.out):
		// The daemon's "no such container", not the program's failure: nothing ran.
		return sandbox.ExecResult{}, a.gone(target, goneRemoved)
	case d.err == nil, errors.Is(d.err, docker.ErrPaused):
		return sandbox.ExecResult{StdoutBytes: d.out.Stdout, StderrBytes: d.out.Stderr, ExitCode: d.out.ExitCode}, nil
	case ctx.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("exec in %s: %w", a.name, ctx.Err())
	case a.b.life.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("exec in %s: %w", a.name, ErrEngineStopped)
	case !time.Now().Before(deadline):
		a.discard(target, goneExecTimeout)
		return sandbox.ExecResult{}, &sandbox.TimeoutError{Op: "exec", Timeout: m.Timeout, Discarded: true}
	case errors.As(d.err, &limitErr):
		if m.MaxOutputBytes == 0 {
			a.discard(target, goneOutputCap)
		}
		return sandbox.ExecResult{}, &sandbox.ExecOutputLimitExceededError{Budget: limit, Discarded: m.MaxOutputBytes == 0}
	}
	return sandbox.ExecResult{}, a.vanished(target, fmt.Errorf("exec in %s: %w", a.name, d.err))
}
