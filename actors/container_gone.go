package actors

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// A sandbox is gone when its instance no longer exists: this actor discarded it (an exec
// timeout, the plain output cap), a later acquire replaced it, or someone removed it behind
// the engine's back. A call on it is answered with [*sandbox.GoneError], never with an
// engine error dressed as the call's outcome, and the actor forgets the instance.

// Reasons a [*sandbox.GoneError] gives.
const (
	goneExecTimeout = "an exec timeout discarded it with its processes"
	goneOutputCap   = "an exec's output went over the plain output cap, which discards it"
	goneDiscarded   = "the engine discarded it"
	goneRemoved     = "the daemon has no such container: it was removed outside this call"
	goneBeforeReset = "it was disposed or replaced before the reset, which makes nothing in its place"
)

// gone records instanceID as gone for reason, forgets what the actor knew of it, and returns
// the typed answer.
func (a *containerActor) gone(instanceID, reason string) error {
	if a.lost != instanceID {
		a.log.Info("sandbox instance gone", zap.String("container_id", instanceID), zap.String("reason", reason))
	}
	if a.info == nil || a.info.ID == instanceID {
		a.forget()
	}
	a.lost, a.lostReason = instanceID, reason
	return &sandbox.GoneError{InstanceID: instanceID, Reason: reason}
}

// discard removes the container of an instance that must not be served again and records it
// as gone for reason.
func (a *containerActor) discard(target, reason string) {
	a.removeContainer(target)
	a.lost, a.lostReason = target, reason
}

// vanished turns a call's failure into [*sandbox.GoneError] when the daemon answered that the
// instance's container does not exist, and into [*sandbox.BackendUnavailableError] when the
// daemon could not be reached; every other outcome passes through.
func (a *containerActor) vanished(instanceID string, err error) error {
	var g *sandbox.GoneError
	if err == nil || instanceID == "" || errors.As(err, &g) || !errors.Is(err, docker.ErrNotFound) {
		return unavailable(err)
	}
	return a.gone(instanceID, goneRemoved)
}

// execGone reports whether an exec's result is in fact the daemon's refusal for a container
// that no longer exists: the answer's shape ([docker.ExecAnswersAbsent]) is confirmed by an
// inspect of the instance, since a guest program can print the same line.
func (a *containerActor) execGone(target string, out docker.ExecOutput) bool {
	if !docker.ExecAnswersAbsent(out, target) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	_, err := a.b.engine.Inspect(ctx, target)
	return errors.Is(err, docker.ErrNotFound)
}
