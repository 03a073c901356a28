package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Passivation: a container actor idle for the backend's idle timeout, holding nothing, asks
// the supervisor to stop it; its memory goes with it, and the name's next call meets a fresh
// actor that inspects again. The steps, and why no call is lost or served twice:
//
//  1. The idle timer fires; the actor, quiet (no exec in flight or starting, no freeze held,
//     nothing stashed) and untouched for the timeout, sends passivateRequest.
//  2. The supervisor marks the name retiring and sends passivate. From now on lookups and
//     forwards for the name wait in the supervisor.
//  3. The actor receives passivate behind whatever was already in its mailbox. Still quiet and
//     untouched since step 1, it stops itself; otherwise it declines and the supervisor hands
//     it the waiters.
//  4. Requests that reach it after that (callers holding its PID) are never run: protoactor
//     drops user messages dispatched to a stopped actor, and the tenure, its mailbox
//     middleware, answers each with a DeadLetterResponse, as protoactor does for a PID no longer
//     registered. The caller's ask sees ErrDeadLetter — "not run" — and resends once through
//     the supervisor (forward), which holds it until the actor has Terminated.
//  5. On Terminated the supervisor spawns the name's next actor (the same PID, so handles keep
//     reaching it) only if calls wait for it, and hands them over.
//
// A handle's calls carry what the acquire that issued it bound (binding), so a fresh actor
// serving a handle without a new acquire still resolves paths under the right base and stamps
// files with the guest's identity.

// DefaultIdleActorTimeout is how long a container actor stays idle before it is stopped.
const DefaultIdleActorTimeout = 10 * time.Minute

// idleCheck is the idle timer firing, for one incarnation.
type idleCheck struct{ gen uint64 }

// The passivation messages may meet an actor, or a supervisor, that stopped meanwhile: that is
// expected, so protoactor does not log them as dead letters.
func (*idleCheck) IgnoreDeadLetterLogging()         {}
func (*passivate) IgnoreDeadLetterLogging()         {}
func (*passivateRequest) IgnoreDeadLetterLogging()  {}
func (*passivateDeclined) IgnoreDeadLetterLogging() {}

// tenure is one incarnation of a name's actor: what survives its restarts but not its stop,
// and the mailbox middleware that dead-letters what arrives once it stopped.
type tenure struct {
	name   string
	gen    uint64
	system *actor.ActorSystem
	hook   func(name string, ev actorEvent) // tests: what happened to the incarnation

	// The exec bookkeeping lives here, not in the actor, so that a restart after a panic
	// neither forgets an exec that may still be starting (a freeze would race it) nor drops
	// the requests stashed behind the one that failed. Actor goroutine only.
	execs    map[uint64]func(error) // execs whose continuation has not run, by number: how to answer one now
	starting map[uint64]struct{}    // execs whose process may not have started yet (see handle)
	execSeq  uint64                 // numbers the execs for starting
	stash    []stashed              // requests waiting for them
	started  bool                   // Started was seen once (a restart sees it again)
	stopped  atomic.Bool            // set by Stopped: user messages dispatched after it never reach Receive
}

var _ actor.MailboxMiddleware = (*tenure)(nil)

func (*tenure) MailboxStarted()   {}
func (*tenure) MessagePosted(any) {}
func (*tenure) MailboxEmpty()     {}
func (t *tenure) MessageReceived(m any) {
	if !t.stopped.Load() {
		return
	}
	// protoactor dispatched m to a stopped actor, which dropped it unseen: say so to whoever
	// waits for an answer, so its ask retries instead of waiting for the ask timeout.
	if env, ok := m.(*actor.MessageEnvelope); ok && env.Sender != nil {
		t.report(t.name, requestDropped)
		t.system.Root.Send(env.Sender, &actor.DeadLetterResponse{})
	}
}

// binding is what an acquire bound for the handle it returned: the handle's calls carry it, and
// an actor that has not acquired since it was spawned adopts it.
type binding struct {
	key      string
	workDir  string
	facts    *facts
	factsKey string
	sleeper  sleeper // sleep.go
}

func (a *containerActor) binding() *binding {
	return &binding{key: a.key, workDir: a.workDir, facts: a.facts, factsKey: a.factsKey, sleeper: a.sleeper}
}

// adopt takes a handle's binding when this actor's memory is empty: it was passivated and
// respawned since the handle's acquire. An acquire of its own always wins.
func (a *containerActor) adopt(bd *binding) {
	if bd == nil || a.workDir != "" {
		return
	}
	a.workDir, a.facts, a.factsKey = bd.workDir, bd.facts, bd.factsKey
	if a.sleeper.instance == "" {
		a.sleeper = bd.sleeper
	}
	if a.key != bd.key {
		a.key = bd.key
		a.setLogger()
	}
}

// quiet reports whether the actor holds nothing that stopping would lose.
func (a *containerActor) quiet() bool {
	return a.holdsNoCall() && !a.sleepHolds()
}

// holdsNoCall reports whether no call holds the actor: no exec in flight or starting, nothing
// stashed, no freeze.
func (a *containerActor) holdsNoCall() bool {
	return len(a.tenure.execs) == 0 && len(a.tenure.starting) == 0 && len(a.tenure.stash) == 0 && a.holding == ""
}

// touch records the arrival of a call: it postpones the idle timeout and withdraws a pending
// request to passivate.
func (a *containerActor) touch() {
	a.lastActive = time.Now()
	a.asked, a.disposed = false, false
}

// settle follows a message that ran calls: the idle time counts from their end, and an actor
// whose disposal removed everything retires at once when nothing else holds it.
func (a *containerActor) settle(actx actor.Context) {
	a.lastActive = time.Now()
	a.armSleep(actx) // sleep.go: the idle time counts from here
	if a.disposed && a.quiet() {
		a.disposed = false
		a.retire(actx)
	}
}

// armIdle starts the idle timer of this incarnation, when passivation is on.
func (a *containerActor) armIdle(actx actor.Context) {
	d := a.b.idleTimeout
	if d <= 0 || a.idle != nil {
		return
	}
	a.lastActive = time.Now()
	root, self, gen := actx.ActorSystem().Root, actx.Self(), a.tenure.gen
	a.idle = time.AfterFunc(d, func() { root.Send(self, &idleCheck{gen: gen}) })
}

func (a *containerActor) disarmIdle() {
	if a.idle != nil {
		a.idle.Stop()
		a.idle = nil
	}
}

// idleFor handles the timer: re-arm it for what remains, or ask to passivate.
func (a *containerActor) idleFor(actx actor.Context) {
	if a.idle == nil {
		return
	}
	d := a.b.idleTimeout
	if rest := d - time.Since(a.lastActive); rest > 0 {
		a.idle.Reset(rest)
		return
	}
	a.idle.Reset(d) // asks again if this one is lost; the supervisor ignores a duplicate
	if a.quiet() {
		a.retire(actx)
	}
}

// retire asks the supervisor to stop this actor.
func (a *containerActor) retire(actx actor.Context) {
	if a.b.idleTimeout <= 0 {
		return
	}
	a.asked = true
	actx.Send(actx.Parent(), &passivateRequest{name: a.name, gen: a.tenure.gen})
}

// passivated is the supervisor's decision: stop if nothing happened since the request,
// decline otherwise. Requests behind this message are dead-lettered by the tenure.
func (a *containerActor) passivated(actx actor.Context) {
	if a.asked && a.quiet() {
		a.log.Debug("container actor passivated")
		a.tenure.report(a.name, actorStopping)
		actx.Stop(actx.Self())
		return
	}
	a.asked = false
	a.tenure.report(a.name, passivationDeclined)
	actx.Send(actx.Parent(), &passivateDeclined{name: a.name, gen: a.tenure.gen})
}

// actorEvent is what the test hook is told.
type actorEvent int

const (
	actorStarted        actorEvent = iota // an incarnation started (not again on a restart)
	actorStopping                         // it accepted the supervisor's decision and stops next
	actorStopped                          // it stopped: no message of it will run any more
	requestDropped                        // a request reached it stopped and was dead-lettered
	passivationDeclined                   // it was busy again when the supervisor's decision came
	callHeld                              // the supervisor held a call while the name's actor retired
)

func (t *tenure) report(name string, ev actorEvent) {
	if t.hook != nil {
		t.hook(name, ev)
	}
}
