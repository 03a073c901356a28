package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors/hostfs"
	"github.com/mafsandbox/engine/docker"
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

	sleepT     *time.Timer // fires sleepCheck (sleep.go); nil when no step is due
	restoring  bool        // a restore's acquire runs: the instance set aside is its own (snapshot.go)
	markerHold *markerHold // the marker of the freeze held, if any (freeze_marker.go)

	// egressBuild is the proxy an allowlisted acquire is building meanwhile (egress_run.go);
	// nil outside such an acquire.
	egressBuild *egressRun

	// The host file plane's root, proven for one instance and process (file_plane.go), and
	// the instance it could not be proven for (auto mode then uses the archive plane).
	host        *hostfs.Root
	hostRefused string
	execChan    execChannelState // the exec channel (exec_channel.go)

	// baseTakenOver is the instance with no recorded storage base whose default base was
	// found to be a directory (container_acquire.go's checkBase); "" when none.
	baseTakenOver string

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
	// without an engine call (container_gone.go).
	lost       string
	lostReason string

	// inPlace holds the directories (→ the instance) where a staging name could not be
	// removed (container_write.go): later writes there go in place.
	inPlace map[string]string

	sleeper sleeper // the sandbox's sleep times and what its reports name (sleep.go)
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
		a.armSleep(ctx)
	case *actor.Restarting:
		a.disarmIdle()
		a.disarmSleep()
		a.thawHeld()
		a.dropHost()
	case *actor.Stopping:
		a.disarmIdle()
		a.disarmSleep()
		a.thawHeld()
		a.dropHost()
		for _, st := range a.tenure.stash {
			ctx.Send(st.sender, st.r.msg.fail(ErrEngineStopped))
		}
		a.tenure.stash = nil
		// An exec still running is answered now: its continuation would meet a stopped actor.
		// At Close the backend's end has already cancelled it on the host side.
		for _, answer := range a.tenure.execs {
			answer(ErrEngineStopped)
		}
		a.tenure.execs = nil
	case *actor.Stopped:
		a.tenure.stopped.Store(true)
		a.tenure.report(a.name, actorStopped)
	case *request:
		a.touch()
		a.handle(ctx, m)
		a.settle(ctx)
	case *containerChanged:
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
	case *sleepCheck:
		if m.gen == a.tenure.gen {
			a.sleepDue(ctx)
		}
	}
}

// containerRequest is one kind of call to a container actor. Each kind is one type, in the
// file of its work, that says how it runs, how it fails and whether it runs frozen; the
// mailbox only orders them (handle and drain, freeze.go). Adding a call is adding a type.
type containerRequest interface {
	// run does the work on the actor and answers through reply. env is the envelope the
	// request came in (a handle's binding; the output function of a streaming exec).
	run(ctx context.Context, a *containerActor, actx actor.Context, env *request, reply func(any))
	// fail is the answer of this kind that carries err: a panic's, or an engine stop's.
	fail(err error) any
	// needsFreeze reports whether the work runs frozen: then it waits for the execs that may
	// still be starting (freeze.go).
	needsFreeze() bool
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
			reply(r.msg.fail(fmt.Errorf("container actor %s failed: %v", a.name, p)))
			panic(p)
		}
	}()
	if a.beforeRequest(r.ctx, r, reply) { // sleep.go: a call that needs the guest running wakes it
		r.msg.run(r.ctx, a, actx, r, reply)
	}
}

// containerChanged is an engine lifecycle event of one container (start, die, pause,
// unpause, destroy), sent by the watch (watch.go) through the supervisor to the name's actor.
type containerChanged struct {
	Name   string
	ID     string
	Action string
	At     time.Time
}

// observe applies an engine event. Our own freezes produce pause and unpause events that
// say nothing new; anything else means the engine's state moved, so the next acquire asks.
func (a *containerActor) observe(m *containerChanged) {
	switch {
	case m.Action == "pause" && a.ownPause > 0:
		a.ownPause--
	case m.Action == "unpause" && a.ownUnpause > 0:
		a.ownUnpause--
	default:
		a.info = nil
		a.hostRefused = "" // a start or restart gives the host plane another process to prove
		a.execChan.refused = ""
	}
}

// forget drops everything known about the instance: it was removed or is about to be made.
func (a *containerActor) forget() {
	a.info, a.facts, a.factsKey, a.probed, a.probedID = nil, nil, "", nil, ""
	a.dropHost()
	a.forgetExecChannel()
}

// current returns what the engine says of the container: the cached answer while the event
// watch vouches for it, else a fresh inspect. (nil, nil) when the engine says it is absent.
func (a *containerActor) current(ctx context.Context) (*docker.ContainerInfo, error) {
	if a.info != nil && a.b.watch != nil && a.b.watch.fresh(a.infoEpoch) {
		return a.info, nil
	}
	return a.refresh(ctx)
}

// refresh inspects the container and caches the answer.
func (a *containerActor) refresh(ctx context.Context) (*docker.ContainerInfo, error) {
	var epoch uint64
	if a.b.watch != nil {
		epoch = a.b.watch.epochFor(ctx)
	}
	info, err := a.b.engine.Inspect(ctx, a.name)
	if errors.Is(err, docker.ErrNotFound) {
		a.info = nil
		return nil, nil
	}
	if err != nil {
		a.info = nil
		return nil, err
	}
	a.info, a.infoEpoch = &info, epoch
	return a.info, nil
}

// removeContainer force-removes target on its own bounded context, ignoring the outcome: it
// is used where the container must not be served again (exec timeout, failed start).
func (a *containerActor) removeContainer(target string) {
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	if _, err := a.b.engine.Remove(ctx, target); err != nil {
		a.log.Warn("remove container", zap.String("target", target), zap.Error(err))
	}
	a.forget()
	if target != a.name {
		a.lost, a.lostReason = target, goneDiscarded // its handles' calls are answered as gone
	}
}

// span starts name, a child of ctx's span, on this actor's container. end closes it, with
// err recorded when it is not nil.
func (a *containerActor) span(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(err error)) {
	ctx, span := a.b.tracer.Start(ctx, name, trace.WithAttributes(append(attrs, semconv.ContainerName(a.name))...))
	return ctx, func(err error) { endSpan(span, err) }
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, "failed")
	}
	span.End()
}
