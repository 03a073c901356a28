package actors

// The freeze: everything that pauses a container lives in this file.
//
// Why. A file call (stat, read, write, the storage base made under running commands) reads
// or changes the guest's filesystem through the engine's archive plane, which follows no
// rule the guest cannot race: between the ancestor walk that clears a path and the copy that
// uses it, a guest process could swap a directory for a link. So the walk and the copy run
// with the container frozen (docker pause), and nothing of the guest moves in between.
//
// The pieces, in the order a freeze lives through them:
//
//   - the record ([Freezes]): process-wide, keyed by daemon endpoint and container name.
//     A claim is taken before pause is issued (a cancelled pause may still have frozen), a
//     confirmation once pause succeeded, and both are dropped around the thaw;
//   - the hold (frozen): claim, pause, body, unconfirm, thaw, release. The actor remembers the
//     target it owes a thaw on (holding) so that a restart or a stop thaws it first
//     (thawHeld);
//   - the thaw (thaw): on its own bounded context, so a cancelled caller still leaves the
//     guest running; it never fails the guarded call;
//   - the stash rule (handle, drain, execStarted): a freeze never begins while an exec of
//     this actor may still be starting. On Docker 20.10 an exec whose start races a pause
//     deadlocks the container (the daemon checks "paused" before it takes the container's
//     lock, then runc joins a frozen cgroup holding it). A request whose work is frozen
//     waits in the stash until the execs in flight have started, and whatever arrives behind
//     it waits too, so calls keep their order;
//   - the marker (freeze_marker.go): a file on the engine's host, locked while the freeze is
//     held and removed once it is thawed, so that a pause found later is told apart from a
//     sleep (sleep.go) even by another process;
//   - the recovery (recoverFrozen): acquire finds a container paused that no freeze of this
//     process claims and this backend did not put to sleep. A dead freeze's marker says a host
//     died inside a file call: it is thawed before reuse. A live marker or a claimed freeze is
//     a live call's and is never lifted. No marker: not a freeze, woken as a sleep.
//
// A freeze never lifts a sleep: a container the engine put to sleep is already still, so a
// file call on it runs at once, with no pause and no thaw of its own.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
)

// Freezes is the process-wide record of container freezes, keyed by the daemon endpoint and
// the container name. Within one [Backend] the container actor's mailbox already keeps two
// freezes of a container apart; the record is what lets acquire's recovery of a container a
// dead host left paused tell that freeze from a live call's, including one made by another
// Backend of this process on the same endpoint (share a Freezes with [WithFreezes]).
type Freezes struct {
	mu   sync.Mutex
	tick uint64
	m    map[freezeKey]*freezeRecord
}

type freezeKey struct{ endpoint, name string }

type freezeRecord struct {
	claims    int    // code in this process owes a thaw
	confirmed bool   // pause returned success and unpause has not been issued
	gen       uint64 // changes whenever confirmed changes
}

// NewFreezes returns an empty record.
func NewFreezes() *Freezes { return &Freezes{m: map[freezeKey]*freezeRecord{}} }

func (f *Freezes) with(k freezeKey, fn func(*freezeRecord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	if r == nil {
		r = &freezeRecord{}
		f.m[k] = r
	}
	fn(r)
	if r.claims == 0 && !r.confirmed {
		delete(f.m, k)
	}
}

// claim is taken before pause is issued: a cancelled pause may still have frozen.
func (f *Freezes) claim(k freezeKey) { f.with(k, func(r *freezeRecord) { r.claims++ }) }

// release drops a claim after the thaw attempt.
func (f *Freezes) release(k freezeKey) { f.with(k, func(r *freezeRecord) { r.claims-- }) }

// confirm records that pause succeeded.
func (f *Freezes) confirm(k freezeKey) {
	f.with(k, func(r *freezeRecord) { f.tick++; r.confirmed, r.gen = true, f.tick })
}

// unconfirm records, just before unpause is issued, that the guest runs again from here.
func (f *Freezes) unconfirm(k freezeKey) {
	f.with(k, func(r *freezeRecord) { f.tick++; r.confirmed, r.gen = false, f.tick })
}

// sole reports whether the caller's own claim is the only one on k and nothing in this process
// has k confirmed frozen: a "paused" answer from the daemon then is not this process's freeze.
func (f *Freezes) sole(k freezeKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	return r != nil && r.claims == 1 && !r.confirmed
}

// claimed reports whether any code in this process owes k a thaw.
func (f *Freezes) claimed(k freezeKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	return r != nil && r.claims > 0
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
// The thaw completes even when ctx is cancelled; body's outcome is returned after it. All of
// it is one span (SpanFreeze), and body gets the context that carries it, so the daemon calls
// of the pause, the checks, the copy and the thaw are its children.
func (a *containerActor) frozen(ctx context.Context, target string, body func(ctx context.Context) error) (err error) {
	ctx, end := a.span(ctx, SpanFreeze)
	defer func() { end(err) }()
	if a.asleepOn(target) {
		// sleep.go: the engine's own sleep already holds the guest still, and it is not this
		// call's to lift.
		return body(ctx)
	}
	k, err := a.freezeKey(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	a.b.freezes.claim(k)
	defer a.b.freezes.release(k)
	// The marker (freeze_marker.go) outlives this process if it dies frozen: removed only
	// once the thaw succeeded (or nothing froze).
	var hold *markerHold
	if mk, ok := a.markerKey(ctx); ok {
		hold = a.b.markers.hold(ctx, mk)
	}
	thawed := true
	defer func() { hold.release(thawed) }()
	err = a.pause(ctx, k, target)
	err = a.refreeze(ctx, k, target, err)
	if err != nil {
		if !daemonAnswered(err) {
			// A pause that timed out or was cancelled may still have frozen the guest.
			thawed = a.thaw(ctx, target)
		}
		var fe *FreezeError
		if errors.As(err, &fe) {
			return err
		}
		return fmt.Errorf("docker could not freeze %s for a file call: %w", a.name, err)
	}
	a.b.freezes.confirm(k)
	a.holding, a.markerHold = target, hold
	a.ownPause++
	defer func() {
		a.b.freezes.unconfirm(k)
		thawed = a.thaw(ctx, target)
		a.holding, a.markerHold = "", nil
		a.b.froze(ctx, began)
	}()
	return body(ctx)
}

// pause pauses target, asked again while the daemon still reports it paused after a thaw
// ([docker.AskWhilePaused]) and no freeze of this process is on it: under one of this
// process's own, "already paused" is true.
func (a *containerActor) pause(ctx context.Context, k freezeKey, target string) error {
	return docker.AskWhilePaused(ctx, func() error { return a.b.engine.Pause(ctx, target) }, func() bool { return a.b.freezes.sole(k) })
}

// Retries of a pause the freezer gave up on (cgroup v1 refuses while the guest's tasks are
// mid-syscall: a guest busy forking or doing I/O). Backoff 10, 20, 40 ms.
const (
	freezeRetries = 3
	freezeBackoff = 10 * time.Millisecond
)

// refreeze retries a pause the freezer gave up on, a few times with a short backoff. Before
// each retry, and after the last failure, the container is unpaused (a no-op when nothing
// is frozen), so a failed attempt never leaves tasks frozen behind it. err passes through
// unless it is [docker.ErrFreezeFailed].
func (a *containerActor) refreeze(ctx context.Context, k freezeKey, target string, err error) error {
	attempts := 1
	for wait := freezeBackoff; errors.Is(err, docker.ErrFreezeFailed) && attempts <= freezeRetries; wait *= 2 {
		a.lift(ctx, target)
		select {
		case <-ctx.Done():
			return &FreezeError{Container: a.name, Attempts: attempts, Err: err}
		case <-time.After(wait):
		}
		a.log.Debug("the freezer gave up on a busy guest; pausing again", zap.Int("attempt", attempts), zap.Error(err))
		attempts++
		err = a.pause(ctx, k, target)
	}
	if errors.Is(err, docker.ErrFreezeFailed) {
		a.lift(ctx, target)
		return &FreezeError{Container: a.name, Attempts: attempts, Err: err}
	}
	return err
}

// lift unpauses after a pause the freezer gave up on. It does not count an unpause event of
// its own (ownUnpause): the daemon emits none when nothing was paused, and a stray count would
// hide a foreign unpause; an event it does cause only makes the next acquire inspect. Of ctx
// it keeps only the values (the span the unpause is a child of), not the cancellation.
func (a *containerActor) lift(ctx context.Context, target string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
	defer cancel()
	if err := a.b.engine.Unpause(ctx, target); err != nil {
		a.log.Warn("unpause after a failed freeze failed; the next acquire lifts it", zap.Error(err))
	}
}

// daemonAnswered reports whether err is the engine's own refusal (nothing was frozen), as
// opposed to a call that ended without an answer.
func daemonAnswered(err error) bool {
	return !errors.Is(err, docker.ErrTimeout) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, docker.ErrUnreachable)
}

// thaw lifts a freeze on target, on its own bounded context so that a cancelled caller
// still leaves the guest running (of ctx it keeps only the values: the span the unpause is a
// child of). It never fails the guarded call; it logs.
func (a *containerActor) thaw(ctx context.Context, target string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
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
	a.markerHold.release(a.thaw(ctx, target))
	a.markerHold = nil
}

// recoverFrozen handles a container an acquire found paused that this backend did not put to
// sleep. A freeze of this process, or a live one of another process on this host (its
// marker locked), is a live call's and is never lifted. A marker nobody holds is a freeze
// whose process died inside a file call: thawed. No marker: not a freeze at all (a sleep
// this process does not remember, or someone's pause), woken (sleep.go).
func (a *containerActor) recoverFrozen(ctx context.Context, info *docker.ContainerInfo) (*docker.ContainerInfo, error) {
	k, err := a.freezeKey(ctx)
	if err != nil {
		return nil, err
	}
	if a.b.freezes.claimed(k) {
		return nil, fmt.Errorf("container %s is frozen by a live file call of this process; try again", a.name)
	}
	mk, marked := a.markerKey(ctx)
	state := markerNone
	if marked {
		state = a.b.markers.probe(mk)
	}
	switch state {
	case markerLive:
		return nil, fmt.Errorf("container %s is frozen by a live file call of another engine process on this host; try again", a.name)
	case markerNone:
		return a.wakeUnremembered(ctx, info)
	}
	if !a.thaw(ctx, info.ID) {
		return nil, fmt.Errorf("could not thaw %s, which a host left frozen; refusing to serve a container whose guest cannot run", a.name)
	}
	a.b.markers.clear(mk)
	a.log.Info("thawed before reuse: a host left it frozen")
	return a.refresh(ctx)
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
// joins a frozen cgroup holding it). The driver reports when an exec's process runs
// (docker.Driver's ExecWithStart), so file calls wait only for that. Whatever arrives behind
// a stashed request waits too, so calls keep their order.
func (a *containerActor) handle(actx actor.Context, r *request) {
	sender := actx.Sender()
	if len(a.tenure.stash) > 0 || (a.execsStarting() && a.mayFreeze(r.msg)) {
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

// drain runs stashed requests in order once no exec is in flight; it stops again at the
// first freeze that an exec it started would race.
func (a *containerActor) drain(actx actor.Context) {
	for len(a.tenure.stash) > 0 {
		next := a.tenure.stash[0]
		if a.execsStarting() && a.mayFreeze(next.r.msg) {
			return
		}
		a.tenure.stash = a.tenure.stash[1:]
		a.run(actx, next.r, next.sender)
	}
}

// beginExec records an exec whose process may not have started yet; the freeze waits for it
// (see handle) until started is called with the number returned.
func (a *containerActor) beginExec() uint64 {
	a.tenure.execSeq++
	seq := a.tenure.execSeq
	if a.tenure.starting == nil {
		a.tenure.starting = map[uint64]struct{}{}
	}
	a.tenure.starting[seq] = struct{}{}
	return seq
}

// execsStarting reports whether an exec of this actor may still be starting: a freeze now
// could race it.
func (a *containerActor) execsStarting() bool { return len(a.tenure.starting) > 0 }
