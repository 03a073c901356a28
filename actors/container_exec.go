package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

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
// (see handle), so a "container is paused" refusal is another party's pause and comes back as
// the daemon's answer, the ordinary result it is; nothing is re-issued. output, when set, is
// handed to the driver, which calls it from the exec's goroutine as it reads.
func (a *containerActor) exec(actx actor.Context, ctx context.Context, m *messages.ExecRequest, output func(int, []byte), reply func(any)) {
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
	if err != nil {
		reply(&messages.ExecResponse{Err: err})
		return
	}
	argv := m.Command.Argv
	if m.Command.Shell != "" {
		argv = []string{"sh", "-c", m.Command.Shell}
	}
	limit := m.MaxOutputBytes
	if limit == 0 {
		limit = DefaultExecOutputLimit
	}
	deadline := time.Now().Add(m.Timeout)
	dir := a.workingDir(m.WorkDir) // on the actor: the goroutine below must not read its state
	a.tenure.execSeq++
	seq := a.tenure.execSeq
	if a.tenure.starting == nil {
		a.tenure.starting = map[uint64]struct{}{}
	}
	a.tenure.starting[seq] = struct{}{}
	f := actor.NewFuture(actx.ActorSystem(), -1)
	root, self := actx.ActorSystem().Root, actx.Self()
	go func() {
		ectx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		stop := context.AfterFunc(a.b.life, cancel)
		defer stop()
		var once sync.Once
		started := func() { once.Do(func() { root.Send(self, &execStarted{seq: seq}) }) }
		req := docker.ExecRequest{Target: target, WorkDir: dir, Argv: argv, MaxOutputBytes: limit, Output: output}
		var done execDone
		if es, ok := a.b.execStarter(); ok {
			done.out, done.err = es.ExecWithStart(ectx, req, started)
		} else {
			done.out, done.err = a.b.engine.Exec(ectx, req)
		}
		root.Send(f.PID(), &done)
	}()
	a.tenure.execs++ // until the continuation runs, the actor is not idle (passivate.go)
	actx.ReenterAfter(f, func(res any, err error) {
		a.tenure.execs--
		done, _ := res.(*execDone)
		if done == nil {
			done = &execDone{err: fmt.Errorf("exec result lost: %v", err)}
		}
		r, err := a.finishExec(ctx, m, target, deadline, limit, done)
		reply(&messages.ExecResponse{Result: r, Err: err})
		a.started(actx, seq) // an ended exec cannot be starting, whatever the driver said
		a.settle(actx)
	})
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

// finishExec judges an exec's outcome on the actor: the caller's cancellation, the caller's
// timeout (which removes the container: no handle reaches the process inside), or the
// output cap (the plain cap discards the sandbox like a timeout).
func (a *containerActor) finishExec(ctx context.Context, m *messages.ExecRequest, target string, deadline time.Time, limit int64, d *execDone) (sandbox.ExecResult, error) {
	var limitErr *docker.OutputLimitError
	switch {
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

// remove deletes one path: the string check, the delete-path walk stopping above the target
// (a final link is what gets unlinked), then rm run as root only when every walked component
// is the host's. Not frozen: the daemon refuses exec on a frozen guest; the reach rule bounds it.
func (a *containerActor) remove(ctx context.Context, m *messages.RemoveRequest) error {
	target, abs, wd, err := a.locate(m.InstanceID, m.Path, m.WorkDir, "remove")
	if err != nil {
		return err
	}
	var owners []paths.Owner
	record := func(_ string, e *docker.Entry) { owners = append(owners, paths.Owner{UID: e.UID, Mode: e.Mode}) }
	rootOK := false
	if e, err := a.b.engine.Stat(ctx, target, "/"); err == nil && e != nil {
		record("/", e)
		rootOK = true
	} else {
		a.log.Debug("stat / before removal", zap.Error(err))
	}
	if _, err := paths.ResolveRemove(ctx, a.guestStat(target, nil, record), m.Path, wd); err != nil {
		return err
	}
	argv := []string{"rm", "-f", "--", abs}
	if m.Recursive {
		argv = []string{"rm", "-rf", "--", abs}
	}
	ctx, cancel := context.WithTimeout(ctx, a.b.commandTimeout())
	defer cancel()
	out, err := a.removal(ctx, target, "/", argv, rootOK && paths.HostOwned(owners, false))
	if err != nil {
		return err
	}
	if out.code != 0 {
		return &sandbox.PathError{Op: "remove", Path: m.Path, Err: fmt.Errorf("could not remove %s: rm exited %d%s", m.Path, out.code, out.detail)}
	}
	return nil
}

// reclaim removes a framework-created directory below the working directory, from "/", with
// the authority the acquire-time reach answer licensed.
func (a *containerActor) reclaim(ctx context.Context, m *messages.ReclaimRequest) error {
	target, err := a.target(m.InstanceID)
	if err != nil {
		return err
	}
	if m.Timeout <= 0 {
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("reclaim timeout must be positive, got %s", m.Timeout)}
	}
	dir, err := paths.ResolveReclaim(m.Dir, a.workingDir(m.WorkDir))
	if err != nil {
		return err
	}
	raise := a.facts != nil && a.facts.reach
	ctx, cancel := context.WithTimeout(ctx, m.Timeout)
	defer cancel()
	out, err := a.removal(ctx, target, "/", []string{"rm", "-rf", "--", dir}, raise)
	if err != nil {
		return err
	}
	if out.code != 0 {
		return &sandbox.PathError{Op: "reclaim", Path: dir, Err: fmt.Errorf("could not reclaim %s: rm exited %d%s", dir, out.code, out.detail)}
	}
	return nil
}

type removalOutcome struct {
	code   int
	detail string // " — stderr", with the root attempt's stderr when both ran
}

// removal runs rm as root when raise, falling back once to the guest when root was refused
// in a container without capabilities; otherwise as the guest. A timeout discards the
// container, as for any exec.
func (a *containerActor) removal(ctx context.Context, target, dir string, argv []string, raise bool) (removalOutcome, error) {
	run := func(user string) (docker.ExecOutput, error) {
		out, err := a.b.engine.Exec(ctx, docker.ExecRequest{Target: target, User: user, WorkDir: dir, Argv: argv, MaxOutputBytes: 64 << 10})
		if err != nil && ctx.Err() == context.DeadlineExceeded {
			a.removeContainer(target)
			return out, &sandbox.TimeoutError{Op: strings.Join(argv[:2], " ")}
		}
		return out, err
	}
	user := ""
	if raise {
		user = "0"
	}
	out, err := run(user)
	if err != nil {
		return removalOutcome{}, fmt.Errorf("run %s: %w", argv[0], err)
	}
	rootStderr := ""
	if raise && out.ExitCode != 0 && a.facts != nil && a.facts.capsDropped {
		rootStderr = strings.TrimSpace(string(out.Stderr))
		if out, err = run(""); err != nil {
			return removalOutcome{}, fmt.Errorf("run %s: %w", argv[0], err)
		}
	}
	res := removalOutcome{code: out.ExitCode}
	if s := strings.TrimSpace(sandbox.DecodeReplace(out.Stderr)); s != "" {
		res.detail = " — " + s
	}
	if rootStderr != "" && res.code != 0 {
		res.detail += " (as root: " + rootStderr + ")"
	}
	return res, nil
}
