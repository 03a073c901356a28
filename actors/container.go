package actors

import (
	"context"
	"errors"
	"fmt"

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
	holding      string // the target a confirmed freeze is owed a thaw on; "" when none
	freezeSerial uint64 // counts freezes this actor confirmed; an exec compares it across its attempt
	ownPause     int    // pause events our own freezes will still produce
	ownUnpause   int    // unpause events our own thaws will still produce

	// Per-instance caches.
	workDir  string // the storage base the last acquire bound
	facts    *facts // identity, reach and caps of the instance, cached only when identity resolved
	factsKey string
	probedID string          // the instance the probe results belong to
	probed   map[string]bool // probe name → passed
}

func newContainerActor(b *Backend, name string) *containerActor {
	return &containerActor{b: b, name: name, log: b.log.With(zap.String("container", name))}
}

// Receive dispatches one message. Lifecycle messages share the switch: a restart or a stop
// first thaws any freeze the actor still owes.
func (a *containerActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Restarting:
		a.thawHeld()
	case *actor.Stopping:
		a.thawHeld()
	case *request:
		a.handle(ctx, m)
	case *messages.ContainerChanged:
		a.observe(m)
	case *watchReset:
		a.info = nil
	}
}

func (a *containerActor) handle(actx actor.Context, r *request) {
	defer func() {
		if p := recover(); p != nil {
			// Answer the caller before the supervisor restarts us, so no call hangs.
			actx.Respond(failureFor(r.msg, fmt.Errorf("container actor %s failed: %v", a.name, p)))
			panic(p)
		}
	}()
	ctx := r.ctx
	switch m := r.msg.(type) {
	case *messages.AcquireRequest:
		actx.Respond(a.acquire(ctx, m))
	case *messages.StatRequest:
		st, err := a.stat(ctx, m)
		actx.Respond(&messages.StatResponse{Stat: st, Err: err})
	case *messages.ReadRequest:
		b, err := a.read(ctx, m)
		actx.Respond(&messages.ReadResponse{Content: b, Err: err})
	case *messages.WriteRequest:
		actx.Respond(&messages.WriteResponse{Err: a.write(ctx, m)})
	case *messages.ExecRequest:
		a.exec(actx, ctx, m)
	case *messages.RemoveRequest:
		actx.Respond(&messages.RemoveResponse{Err: a.remove(ctx, m)})
	case *messages.ReclaimRequest:
		actx.Respond(&messages.ReclaimResponse{Err: a.reclaim(ctx, m)})
	case *messages.DisposeRequest:
		actx.Respond(a.dispose(ctx, m))
	default:
		actx.Respond(failureFor(r.msg, fmt.Errorf("container actor: unexpected message %T", r.msg)))
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
	if err := a.b.engine.Pause(ctx, target); err != nil {
		if !daemonAnswered(err) {
			// A pause that timed out or was cancelled may still have frozen the guest.
			a.thaw(target)
		}
		return fmt.Errorf("docker could not freeze %s for a file call: %w", a.name, err)
	}
	a.b.freezes.confirm(k)
	a.holding = target
	a.freezeSerial++
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
