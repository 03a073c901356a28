package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// containerActor owns one container, named by the derived container name. Its mailbox
// serialises everything done to that container; its fields are touched only from Receive.
type containerActor struct {
	b    *Backend
	name string
	log  *zap.Logger

	// info is what the engine last said about the container; it stays valid while the event
	// watch that would report a change has not been reset since (infoEpoch).
	info      *docker.ContainerInfo
	infoEpoch uint64

	// The freeze this actor holds, if any, and what it has done with freezes before.
	holding    string // the target a confirmed freeze is owed a thaw on; "" when none
	ownPause   int    // pause events our own freezes will still produce
	ownUnpause int    // unpause events our own thaws will still produce

	// Passivation (passivate.go).
	tenure     *tenure     // this incarnation: kept across restarts, not across a stop
	idle       *time.Timer // fires idleCheck; nil when passivation is off
	lastActive time.Time
	asked      bool // a passivateRequest is out and nothing happened since
	disposed   bool // a disposal removed everything: retire as soon as quiet

	*memory // what it knows of the instance, kept across restarts
}

// memory is what a container actor knows of its instance. The supervisor keeps it per
// incarnation, so an actor restarted after a failure still stamps files with the guest's
// identity and resolves paths under the base its acquire bound; it goes when the actor is
// passivated (a handle's calls then carry their acquire's binding).
type memory struct {
	key      string // the sandbox key, for the log lines; set by the first acquire
	workDir  string // the storage base the last acquire bound
	facts    *facts // identity and caps of the instance, cached only when identity resolved
	factsKey string
	probedID string          // the instance the probe results belong to
	probed   map[string]bool // probe name → passed
	// provedNetwork is the egress network whose seal this actor's proxy last proved; a
	// network it has not proved (new, or adopted) is proved before it is handed out.
	provedNetwork string

	// The last instance known to be gone and how it went: a call on its handle is answered
	// without an engine call (gone.go).
	lost       string
	lostReason string

	// inPlace holds the directories (→ the instance) where a staging name could not be
	// removed (container_write.go): later writes there go in place.
	inPlace map[string]string
}

func newContainerActor(b *Backend, name string, mem *memory, t *tenure) *containerActor {
	a := &containerActor{b: b, name: name, memory: mem, tenure: t}
	a.setLogger()
	return a
}

// setLogger derives the actor's logger once: every line carries the container and, once an
// acquire has named it, the key.
func (a *containerActor) setLogger() {
	a.log = a.b.log.With(zap.String("container", a.name))
	if a.key != "" {
		a.log = a.log.With(zap.String("key", a.key))
	}
}

// Receive dispatches one message. Lifecycle messages share the switch: a restart or a stop
// first thaws any freeze the actor still owes.
func (a *containerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if !a.tenure.started {
			a.tenure.started = true
			a.tenure.report(a.name, actorStarted)
		} else {
			// A restart: the requests stashed behind the one that failed are still owed a run.
			a.drain(ctx)
		}
		a.armIdle(ctx)
	case *actor.Restarting:
		a.disarmIdle()
		a.thawHeld()
	case *actor.Stopping:
		a.disarmIdle()
		a.thawHeld()
		for _, st := range a.tenure.stash {
			ctx.Send(st.sender, failureFor(st.r.msg, ErrEngineStopped))
		}
		a.tenure.stash = nil
	case *actor.Stopped:
		a.tenure.stopped.Store(true)
		a.tenure.report(a.name, actorStopped)
	case *request:
		a.touch()
		a.handle(ctx, m)
		a.settle(ctx)
	case *messages.ContainerChanged:
		a.observe(m)
	case *watchReset:
		a.info = nil
	case *execStarted:
		a.started(ctx, m.seq)
		a.settle(ctx)
	case *idleCheck:
		if m.gen == a.tenure.gen {
			a.idleFor(ctx)
		}
	case *passivate:
		if m.gen == a.tenure.gen {
			a.passivated(ctx)
		}
	}
}

// execStarted says an exec's process runs (or the exec ended): a freeze can no longer race
// its start.
type execStarted struct{ seq uint64 }

// started forgets a starting exec and runs what waited for it.
func (a *containerActor) started(actx actor.Context, seq uint64) {
	if _, ok := a.tenure.starting[seq]; !ok {
		return
	}
	delete(a.tenure.starting, seq)
	a.drain(actx)
}

// handle runs one request, or stashes it: a freeze never begins while an exec of this actor
// may still be starting. On this engine an exec whose start races a pause deadlocks the
// container (the daemon checks "paused" before it takes the container's lock, then runc
// joins a frozen cgroup holding it). A driver that reports when an exec's process runs
// (docker.ExecStarter, the API driver) lets file calls wait only for that; the CLI cannot
// tell, so there they wait for the execs in flight. Whatever arrives behind a stashed
// request waits too, so calls keep their order.
func (a *containerActor) handle(actx actor.Context, r *request) {
	sender := actx.Sender()
	if len(a.tenure.stash) > 0 || (len(a.tenure.starting) > 0 && needsFreeze(r.msg)) {
		a.tenure.stash = append(a.tenure.stash, stashed{r: r, sender: sender})
		return
	}
	a.run(actx, r, sender)
}

// stashed is a request waiting for the execs in flight to end.
type stashed struct {
	r      *request
	sender *actor.PID
}

// needsFreeze reports the requests whose work is frozen.
func needsFreeze(msg any) bool {
	switch msg.(type) {
	case *messages.StatRequest, *messages.ReadRequest, *messages.WriteRequest:
		return true
	}
	return false
}

// drain runs stashed requests in order once no exec is in flight; it stops again at the
// first freeze that an exec it started would race.
func (a *containerActor) drain(actx actor.Context) {
	for len(a.tenure.stash) > 0 {
		next := a.tenure.stash[0]
		if len(a.tenure.starting) > 0 && needsFreeze(next.r.msg) {
			return
		}
		a.tenure.stash = a.tenure.stash[1:]
		a.run(actx, next.r, next.sender)
	}
}

func (a *containerActor) run(actx actor.Context, r *request, sender *actor.PID) {
	reply := func(m any) {
		if sender != nil {
			actx.Send(sender, m)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			// Answer the caller before the supervisor restarts us, so no call hangs.
			reply(failureFor(r.msg, fmt.Errorf("container actor %s failed: %v", a.name, p)))
			panic(p)
		}
	}()
	ctx := r.ctx
	switch r.msg.(type) {
	case *messages.AcquireRequest, *messages.DisposeRequest:
	default:
		a.adopt(r.bound) // a handle's call: its acquire's binding, if this actor has none
	}
	switch m := r.msg.(type) {
	case *messages.AcquireRequest:
		res := a.acquire(ctx, m)
		if res.Err == nil {
			r.bound = a.binding() // read by the caller once the reply arrived
		}
		reply(res)
	case *messages.StatRequest:
		st, err := a.stat(ctx, m)
		reply(&messages.StatResponse{Stat: st, Err: a.vanished(m.InstanceID, err)})
	case *messages.ReadRequest:
		b, err := a.read(ctx, m)
		reply(&messages.ReadResponse{Content: b, Err: a.vanished(m.InstanceID, err)})
	case *messages.WriteRequest:
		reply(&messages.WriteResponse{Err: a.vanished(m.InstanceID, a.write(ctx, m))})
	case *messages.ExecRequest:
		a.exec(actx, ctx, m, r.output, reply)
	case *messages.RemoveRequest:
		reply(&messages.RemoveResponse{Err: a.vanished(m.InstanceID, a.remove(ctx, m))})
	case *messages.ReclaimRequest:
		reply(&messages.ReclaimResponse{Err: a.vanished(m.InstanceID, a.reclaim(ctx, m))})
	case *messages.DisposeRequest:
		res := a.dispose(ctx, m)
		reply(res)
		if res.Failure == nil && (m.InstanceID == "" || res.Removed) {
			// Everything under the name is gone: what this actor knows is worth nothing.
			a.disposed = true
		}
	default:
		reply(failureFor(r.msg, fmt.Errorf("container actor: unexpected message %T", r.msg)))
	}
}

// failureFor builds the response type that matches a request, carrying err.
func failureFor(msg any, err error) any {
	switch msg.(type) {
	case *messages.AcquireRequest:
		return &messages.AcquireResponse{Err: err}
	case *messages.StatRequest:
		return &messages.StatResponse{Err: err}
	case *messages.ReadRequest:
		return &messages.ReadResponse{Err: err}
	case *messages.WriteRequest:
		return &messages.WriteResponse{Err: err}
	case *messages.ExecRequest:
		return &messages.ExecResponse{Err: err}
	case *messages.RemoveRequest:
		return &messages.RemoveResponse{Err: err}
	case *messages.ReclaimRequest:
		return &messages.ReclaimResponse{Err: err}
	case *messages.DisposeRequest:
		return &messages.DisposeResponse{Failure: &sandbox.DisposalFailure{Code: sandbox.DisposalUnknown, Detail: err.Error()}}
	}
	return err
}

// observe applies an engine event. Our own freezes produce pause and unpause events that
// say nothing new; anything else means the engine's state moved, so the next acquire asks.
func (a *containerActor) observe(m *messages.ContainerChanged) {
	switch {
	case m.Action == "pause" && a.ownPause > 0:
		a.ownPause--
	case m.Action == "unpause" && a.ownUnpause > 0:
		a.ownUnpause--
	default:
		a.info = nil
	}
}

// forget drops everything known about the instance: it was removed or is about to be made.
func (a *containerActor) forget() {
	a.info, a.facts, a.factsKey, a.probed, a.probedID = nil, nil, "", nil, ""
}

// freezeKey is this container's key in the process-wide freeze record.
func (a *containerActor) freezeKey(ctx context.Context) (freezeKey, error) {
	bnd, err := a.b.engine.Bind(ctx)
	if err != nil {
		return freezeKey{}, err
	}
	return freezeKey{endpoint: bnd.Endpoint, name: a.name}, nil
}

// frozen runs body with the container frozen: claim, pause, body, unconfirm, thaw, release.
// The thaw completes even when ctx is cancelled; body's outcome is returned after it.
func (a *containerActor) frozen(ctx context.Context, target string, body func() error) error {
	k, err := a.freezeKey(ctx)
	if err != nil {
		return err
	}
	a.b.freezes.claim(k)
	defer a.b.freezes.release(k)
	err = a.b.engine.Pause(ctx, target)
	for wait := 20 * time.Millisecond; errors.Is(err, docker.ErrPaused) && a.b.freezes.sole(k) && wait <= 320*time.Millisecond; wait *= 2 {
		// No freeze of this process is on it. 20.10 applies containerd's events late: the
		// "paused" of an earlier freeze can land after the unpause that followed it, and the
		// daemon reports a running container paused until the matching "resumed" lands. Ask
		// again for a moment; a pause someone else really holds is still refused after it.
		select {
		case <-ctx.Done():
		case <-time.After(wait):
			err = a.b.engine.Pause(ctx, target)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		if !daemonAnswered(err) {
			// A pause that timed out or was cancelled may still have frozen the guest.
			a.thaw(target)
		}
		return fmt.Errorf("docker could not freeze %s for a file call: %w", a.name, err)
	}
	a.b.freezes.confirm(k)
	a.holding = target
	a.ownPause++
	defer func() {
		a.b.freezes.unconfirm(k)
		a.thaw(target)
		a.holding = ""
	}()
	return body()
}

// daemonAnswered reports whether err is the engine's own refusal (nothing was frozen), as
// opposed to a call that ended without an answer.
func daemonAnswered(err error) bool {
	return !errors.Is(err, docker.ErrTimeout) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, docker.ErrUnreachable)
}

// thaw lifts a freeze on target, on its own bounded context so that a cancelled caller
// still leaves the guest running. It never fails the guarded call; it logs.
func (a *containerActor) thaw(target string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	var err error
	for range 3 {
		if err = a.b.engine.Unpause(ctx, target); err == nil {
			a.ownUnpause++
			return true
		}
		if ctx.Err() != nil {
			break
		}
	}
	a.log.Warn("thaw failed; the next acquire lifts it", zap.Error(err))
	return false
}

// thawHeld thaws the freeze this actor owes, if any: the first thing a restart or a stop does.
func (a *containerActor) thawHeld() {
	if a.holding == "" {
		return
	}
	target := a.holding
	a.holding = ""
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	if k, err := a.freezeKey(ctx); err == nil {
		a.b.freezes.unconfirm(k)
	}
	a.thaw(target)
}
