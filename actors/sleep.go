package actors

// Sleep: an idle sandbox is paused, then stopped, and woken by the next call that needs it.
//
// The steps, each on the container's actor (so none races a call, a freeze or an exec):
//
//   - the sleep timer fires when the sandbox has had no call for its pause time
//     ([sandbox.Sleep], the spec's or the backend's [WithSleep]). If the actor holds nothing (no
//     exec in flight or starting, no freeze, nothing stashed, no proxy being built) the
//     container is paused (docker pause: the cgroup freezer; its processes stay, frozen, and
//     use no CPU), recorded in the backend's sleep book and reported (SandboxPaused, idle);
//   - at its stop time a sandbox is stopped (docker stop: its filesystem stays, its processes
//     do not) and reported (SandboxStopped, idle);
//   - a call that needs the guest running (an exec, a write, a removal, and any call kind not
//     named below) wakes a paused sandbox first (docker unpause, SandboxWoken with reason
//     call, processes kept) and then runs as if it had never slept; on a stopped one it is
//     answered as gone (its processes are), and the next acquire starts it again (SandboxWoken
//     from stopped, processes not kept). An acquire wakes either.
//   - a stat or a read does not wake it: the host plane reads a frozen guest's files as a
//     running one's, and on the archive plane a sleeping container is already still, so the
//     file call's own freeze is not needed (frozen runs its body at once, and never thaws
//     what it did not freeze);
//   - a disposal removes it asleep.
//
// A sleep is not a freeze (freeze_marker.go): the actor that paused knows it holds a sleep,
// a freeze never thaws one, and a paused container an engine finds without remembering it is
// told apart by the freeze markers. An actor whose sandbox sleeps with a stop still to come
// is not passivated (its timer would go with it); a stopped one may be, since the backend's
// sleep book, not the actor, remembers the sleep.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// The states a sandbox sleeps in.
const (
	sleepPaused  = sandbox.WokenFromPaused
	sleepStopped = sandbox.WokenFromStopped
)

// sleepRecord is one sleeping sandbox, as the backend remembers it.
type sleepRecord struct {
	State    string // sleepPaused or sleepStopped
	Reason   string // why it was put to sleep (sandbox.ReasonIdle, ReasonOperator)
	Since    time.Time
	Instance string
	Key      sandbox.Key
	Kind     string
}

// sleepBook is the backend's record of its sleeping sandboxes, by container name. Only the
// name's actor writes its entry; it outlives the actor (passivation), not the process.
type sleepBook struct {
	mu sync.Mutex
	m  map[string]sleepRecord
}

func (s *sleepBook) get(name string) (sleepRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[name]
	return r, ok
}

func (s *sleepBook) put(name string, r sleepRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]sleepRecord{}
	}
	s.m[name] = r
}

func (s *sleepBook) drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

// SleepState reports whether the engine put the container name to sleep: "paused" or
// "stopped", with the reason and since when; ok false when it is not asleep as far as this
// backend knows.
func (b *Backend) SleepState(name string) (state, reason string, since time.Time, ok bool) {
	r, ok := b.sleeps.get(name)
	return r.State, r.Reason, r.Since, ok
}

// SleepState is "paused" or "stopped" when the backend put this handle's instance to sleep,
// "" when it is awake (as far as this backend knows).
func (s *Sandbox) SleepState() string {
	r, ok := s.b.sleeps.get(s.name)
	if !ok || r.Instance != s.inst().id {
		return ""
	}
	return r.State
}

// sleeper is what the actor knows of its sandbox's sleep: the times its last acquire
// resolved and what to report. Kept across restarts (memory), not across a passivation.
type sleeper struct {
	policy   sandbox.Sleep
	key      sandbox.Key
	kind     string
	instance string
}

// sleepCheck is the sleep timer firing, for one incarnation.
type sleepCheck struct{ gen uint64 }

// IgnoreDeadLetterLogging: a timer may fire for an actor that stopped meanwhile.
func (*sleepCheck) IgnoreDeadLetterLogging() {}

// sleepPolicy is the sleep a spec resolves to: its own, else the backend's.
func (b *Backend) sleepPolicy(spec sandbox.Spec) sandbox.Sleep {
	if spec.Sleep != nil {
		return *spec.Sleep
	}
	return b.sleepDefault
}

// slept records what an acquire handed out (the timer is armed when the request settles): the
// sleep times of its spec, none for a warm pool's member (it has no key until it is taken).
func (a *containerActor) slept(m *acquireRequest, instance string) {
	if m.Pool != "" {
		a.sleeper = sleeper{}
		return
	}
	a.sleeper = sleeper{policy: a.b.sleepPolicy(m.Spec), key: m.Key, kind: m.Spec.Kind, instance: instance}
}

// armSleep sets the timer for the next step due, if any.
func (a *containerActor) armSleep(actx actor.Context) {
	due, ok := a.nextSleep()
	if !ok {
		a.disarmSleep()
		return
	}
	if a.sleepT != nil {
		a.sleepT.Reset(due)
		return
	}
	root, self, gen := actx.ActorSystem().Root, actx.Self(), a.tenure.gen
	a.sleepT = time.AfterFunc(due, func() { root.Send(self, &sleepCheck{gen: gen}) })
}

func (a *containerActor) disarmSleep() {
	if a.sleepT != nil {
		a.sleepT.Stop()
		a.sleepT = nil
	}
}

// nextSleep is how long until the next step: the pause of an awake sandbox, the stop of an
// awake or paused one; none for a stopped one or when both steps are off.
func (a *containerActor) nextSleep() (time.Duration, bool) {
	pol := a.sleeper.policy
	if pol.Off() || a.sleeper.instance == "" {
		return 0, false
	}
	idle := time.Since(a.lastActive)
	rec, asleep := a.b.sleeps.get(a.name)
	var steps []time.Duration
	if !asleep && pol.PauseAfter > 0 {
		steps = append(steps, pol.PauseAfter)
	}
	if (!asleep || rec.State == sleepPaused) && pol.StopAfter > 0 {
		steps = append(steps, pol.StopAfter)
	}
	if len(steps) == 0 {
		return 0, false
	}
	due := min(steps[0], steps[len(steps)-1]) - idle
	return max(due, time.Millisecond), true
}

// sleepDue handles the timer: the step due now, if the actor holds nothing, then the next.
func (a *containerActor) sleepDue(actx actor.Context) {
	if a.sleepT == nil {
		return
	}
	pol := a.sleeper.policy
	idle := time.Since(a.lastActive)
	rec, asleep := a.b.sleeps.get(a.name)
	if a.holdsNoCall() && a.egressBuild == nil {
		ctx, cancel := context.WithTimeout(a.b.life, a.b.commandTimeout())
		switch {
		case (!asleep || rec.State == sleepPaused) && pol.StopAfter > 0 && idle >= pol.StopAfter:
			a.stopAsleep(ctx, sandbox.ReasonIdle, idle)
		case !asleep && pol.PauseAfter > 0 && idle >= pol.PauseAfter:
			a.pauseAsleep(ctx, sandbox.ReasonIdle, idle)
		}
		cancel()
	}
	a.armSleep(actx)
}

// pauseAsleep pauses the sandbox and records its sleep. A pause the freezer gave up on (a
// busy guest) is tried again a few times, then at the next step.
func (a *containerActor) pauseAsleep(ctx context.Context, reason string, idle time.Duration) error {
	target := a.sleeper.instance
	k, err := a.freezeKey(ctx)
	if err != nil {
		return err
	}
	if a.b.freezes.claimed(k) {
		return fmt.Errorf("pause %s: a file call of this process is freezing it", a.name)
	}
	if mk, ok := a.markerKey(ctx); ok {
		a.b.markers.clear(mk) // a stale marker must not make this sleep read as a dead freeze
	}
	err = a.refreeze(ctx, k, target, a.b.engine.Pause(ctx, target))
	if err != nil {
		if !daemonAnswered(err) {
			a.lift(ctx, target)
		}
		a.log.Info("sandbox not paused", zap.String("reason", reason), zap.Error(err))
		return fmt.Errorf("pause %s: %w", a.name, err)
	}
	a.ownPause++
	a.info = nil
	a.b.sleeps.put(a.name, sleepRecord{State: sleepPaused, Reason: reason, Since: time.Now(), Instance: target,
		Key: a.sleeper.key, Kind: a.sleeper.kind})
	a.log.Info("sandbox paused", zap.String("reason", reason), zap.Duration("idle", idle))
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SandboxPaused(ctx, sandbox.SandboxPaused{Act: a.sleeper.act(target), Reason: reason, IdleFor: idle})
	}
	return nil
}

// stopAsleep stops the sandbox (paused or not) and records it: its filesystem stays, its
// processes do not. A driver that cannot stop leaves the sandbox as it is.
func (a *containerActor) stopAsleep(ctx context.Context, reason string, idle time.Duration) {
	st, ok := a.b.engine.Driver.(stopper)
	if !ok {
		a.log.Info("sandbox not stopped: the driver cannot stop a container")
		a.sleeper.policy.StopAfter = 0
		return
	}
	target := a.sleeper.instance
	if err := st.Stop(ctx, target, 0); err != nil {
		a.log.Info("sandbox not stopped", zap.String("reason", reason), zap.Error(err))
		return
	}
	a.info = nil
	a.dropHost()
	a.forgetExecChannel()
	a.b.sleeps.put(a.name, sleepRecord{State: sleepStopped, Reason: reason, Since: time.Now(), Instance: target,
		Key: a.sleeper.key, Kind: a.sleeper.kind})
	a.log.Info("sandbox stopped: its files are kept, its processes are not", zap.String("reason", reason), zap.Duration("idle", idle))
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SandboxStopped(ctx, sandbox.SandboxStopped{Act: a.sleeper.act(target), Reason: reason, IdleFor: idle})
	}
}

// stopper is the one call of docker.Snapshotting a stop needs.
type stopper interface {
	Stop(ctx context.Context, target string, grace time.Duration) error
}

// wake unpauses a sandbox this backend put to sleep paused; nothing when it is not. The
// unpause runs on its own bounded context, so that a cancelled caller does not leave a wake
// half done.
func (a *containerActor) wake(ctx context.Context, reason string) error {
	rec, ok := a.b.sleeps.get(a.name)
	if !ok || rec.State != sleepPaused {
		return nil
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
	defer cancel()
	if err := a.b.engine.Unpause(uctx, rec.Instance); err != nil {
		return unavailable(fmt.Errorf("wake %s: %w", a.name, err))
	}
	a.ownUnpause++
	a.b.sleeps.drop(a.name)
	a.log.Info("sandbox woken", zap.String("reason", reason), zap.Duration("slept", time.Since(rec.Since)))
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SandboxWoken(ctx, sandbox.SandboxWoken{Act: rec.act(rec.Instance), Reason: reason, From: sleepPaused, ProcessesKept: true,
			SleptFor: time.Since(rec.Since)})
	}
	return nil
}

// wakeUnremembered unpauses a container found paused that no freeze left (no marker) and
// this backend does not remember putting to sleep: a sleep of an engine process since gone,
// or a pause by someone else. It is reported as a wake whose sleep is unknown.
func (a *containerActor) wakeUnremembered(ctx context.Context, info *docker.ContainerInfo) (*docker.ContainerInfo, error) {
	if !a.thaw(ctx, info.ID) {
		return nil, fmt.Errorf("could not unpause %s, found paused outside any file call; refusing to serve a container whose guest cannot run", a.name)
	}
	a.log.Info("woken before reuse: it was paused outside any file call (a sleep, or a pause by someone else)")
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SandboxWoken(ctx, sandbox.SandboxWoken{Act: sandbox.Act{Backend: BackendName, InstanceID: info.ID}, Reason: sandbox.ReasonCall,
			From: sleepPaused, ProcessesKept: true})
	}
	return a.refresh(ctx)
}

// startedAgain reports, after an acquire, the wake of a sandbox this backend had stopped:
// the acquire started it again, so its processes were not kept.
func (a *containerActor) startedAgain(ctx context.Context, rec sleepRecord, outcome, instance string) {
	a.b.sleeps.drop(a.name)
	if outcome != sandbox.OutcomeRestarted && outcome != sandbox.OutcomeAdopted {
		return
	}
	if obs := a.b.reporter(ctx); obs != nil {
		obs.SandboxWoken(ctx, sandbox.SandboxWoken{Act: rec.act(instance), Reason: sandbox.ReasonCall, From: sleepStopped,
			ProcessesKept: false, SleptFor: time.Since(rec.Since)})
	}
}

// asleepOn reports whether target is the instance this backend put to sleep (paused or
// stopped): nothing of its guest runs, so a file call needs no freeze of its own.
func (a *containerActor) asleepOn(target string) bool {
	rec, ok := a.b.sleeps.get(a.name)
	return ok && (rec.Instance == target || target == a.name)
}

// beforeRequest runs ahead of every request: a call that needs the guest running wakes a
// paused sandbox, and is answered as gone on a stopped one. It reports false when it has
// answered the request itself.
func (a *containerActor) beforeRequest(ctx context.Context, r *request, reply func(any)) bool {
	rec, asleep := a.b.sleeps.get(a.name)
	if !asleep {
		return true
	}
	switch r.msg.(type) {
	case *statRequest, *readRequest, *acquireRequest, *pauseRequest, *snapshotRequest:
		return true // need no running guest; an acquire wakes in its own steps
	case *disposeRequest:
		a.b.sleeps.drop(a.name) // removed asleep: nothing to wake
		return true
	}
	if rec.State == sleepStopped {
		reply(r.msg.fail(&sandbox.GoneError{InstanceID: rec.Instance,
			Reason: "it was stopped after being idle: its processes were not kept (its files were); its next acquire starts it again"}))
		return false
	}
	if err := a.wake(ctx, sandbox.ReasonCall); err != nil {
		reply(r.msg.fail(err))
		return false
	}
	return true
}

// sleepHolds reports whether stopping the actor would lose a step still to come: a paused
// sandbox whose stop is pending keeps its actor (and the timer).
func (a *containerActor) sleepHolds() bool {
	rec, ok := a.b.sleeps.get(a.name)
	return ok && rec.State == sleepPaused && a.sleeper.policy.StopAfter > 0
}

// pauseRequest puts the sandbox to sleep now, as an operator asks (the context's act reason).
type pauseRequest struct {
	InstanceID string
}

type pauseResponse struct{ Err error }

// needsFreeze is true: a pause must not race an exec's start (freeze.go).
func (*pauseRequest) needsFreeze() bool  { return true }
func (*pauseRequest) fail(err error) any { return &pauseResponse{Err: err} }

func (m *pauseRequest) run(ctx context.Context, a *containerActor, _ actor.Context, env *request, reply func(any)) {
	reply(&pauseResponse{Err: a.pauseNow(ctx, m, env)})
}

func (a *containerActor) pauseNow(ctx context.Context, m *pauseRequest, env *request) error {
	target, err := a.target(m.InstanceID)
	if err != nil {
		return err
	}
	if _, asleep := a.b.sleeps.get(a.name); asleep {
		return nil // already asleep
	}
	if n := len(a.tenure.execs); n > 0 {
		return &sandbox.BackendUnavailableError{Backend: BackendName,
			Reason: fmt.Sprintf("%d commands are running in the sandbox; pause it once they end", n)}
	}
	a.adopt(env.bound)
	if a.sleeper.instance != target {
		a.sleeper = sleeper{instance: target} // not acquired here: no sleep times, only this pause
	}
	reason := sandbox.ActReason(ctx)
	if err := a.pauseAsleep(ctx, reason, time.Since(a.lastActive)); err != nil {
		return unavailable(err)
	}
	return nil
}

// Pause implements [sandbox.Pausable]: the sandbox sleeps now, paused, with the context's act
// reason; the next call that needs it running wakes it. A sandbox already asleep is left so.
// Refused with [*sandbox.BackendUnavailableError] while commands run in it.
func (s *Sandbox) Pause(ctx context.Context) error {
	res, err := ask[*pauseResponse](ctx, s.b, s.name, s.pid, s.envelope(&pauseRequest{InstanceID: s.inst().id}), 0)
	if err != nil {
		return err
	}
	return res.Err
}

// act is the common part of an act on the sleeper's sandbox, instance the one it concerns.
func (s sleeper) act(instance string) sandbox.Act {
	return sandbox.Act{Key: s.key, Kind: s.kind, Backend: BackendName, InstanceID: instance}
}

// act is the common part of an act on the sleeping sandbox r records.
func (r sleepRecord) act(instance string) sandbox.Act {
	return sandbox.Act{Key: r.Key, Kind: r.Kind, Backend: BackendName, InstanceID: instance}
}
