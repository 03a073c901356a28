package sandbox

import (
	"context"
	"fmt"
	"time"
)

// Sleep says when an idle sandbox sleeps: paused after PauseAfter without a call (its
// processes stay, frozen, and use no CPU), stopped after StopAfter (its filesystem stays, its
// processes do not). Zero turns a step off. The next call that needs the sandbox running wakes
// it: a paused one transparently, a stopped one at its next acquire, which starts it again.
type Sleep struct {
	PauseAfter time.Duration
	StopAfter  time.Duration
}

// Validate refuses a negative time, or a stop that would come before the pause it follows.
func (s Sleep) Validate() error {
	if s.PauseAfter < 0 || s.StopAfter < 0 {
		return &InvalidArgumentError{Reason: fmt.Sprintf("sleep times must not be negative, got pause after %s and stop after %s", s.PauseAfter, s.StopAfter)}
	}
	if s.PauseAfter > 0 && s.StopAfter > 0 && s.StopAfter <= s.PauseAfter {
		return &InvalidArgumentError{Reason: fmt.Sprintf("a sandbox stops after it paused: stop after (%s) must be longer than pause after (%s)", s.StopAfter, s.PauseAfter)}
	}
	return nil
}

// Off reports whether neither step is on.
func (s Sleep) Off() bool { return s.PauseAfter == 0 && s.StopAfter == 0 }

// WithSleep overrides the backend's sleep times for this workload (Spec.Sleep); zero turns a
// step off for it.
func WithSleep(pauseAfter, stopAfter time.Duration) SpecOption {
	return func(s *Spec) error {
		sl := Sleep{PauseAfter: pauseAfter, StopAfter: stopAfter}
		if err := sl.Validate(); err != nil {
			return err
		}
		s.Sleep = &sl
		return nil
	}
}

// Why a sandbox's lifecycle act happened: reported with every pause, wake, stop, snapshot,
// restore and fork.
const (
	ReasonIdle     = "idle"     // nothing called it for the configured time
	ReasonCall     = "call"     // a call asked for it (or needed it running)
	ReasonOperator = "operator" // an operator asked for it
)

type actReasonKey struct{}

// WithActReason returns a context whose lifecycle acts are reported with reason (one of the
// Reason constants). The service sets [ReasonOperator] for an operator's call.
func WithActReason(ctx context.Context, reason string) context.Context {
	return context.WithValue(ctx, actReasonKey{}, reason)
}

// ActReason is the reason ctx carries, [ReasonCall] when none.
func ActReason(ctx context.Context) string {
	if r, ok := ctx.Value(actReasonKey{}).(string); ok && r != "" {
		return r
	}
	return ReasonCall
}

// Pausable is implemented by sandboxes that can be put to sleep on demand: Pause freezes the
// sandbox's processes now (reported with the context's [ActReason]); the next call that needs
// it running wakes it.
type Pausable interface {
	Pause(ctx context.Context) error
}

// SandboxPaused is a sandbox paused: its processes frozen, kept.
type SandboxPaused struct {
	Act
	Reason  string        // ReasonIdle, or ReasonCall / ReasonOperator for a pause asked for
	IdleFor time.Duration // since its last call
}

// SandboxWoken is a sleeping sandbox made to run again.
type SandboxWoken struct {
	Act
	Reason string // ReasonCall: the call that needed it; ReasonOperator
	// From is what it woke from: "paused" (its processes kept) or "stopped" (started again:
	// its processes were not kept).
	From          string
	ProcessesKept bool
	// SleptFor is how long it slept, when the engine that put it to sleep is the one that woke
	// it; zero when unknown (a sleep another engine process made).
	SleptFor time.Duration
}

// SandboxStopped is a sandbox stopped by the engine: its filesystem kept, its processes not.
type SandboxStopped struct {
	Act
	Reason  string // ReasonIdle or ReasonOperator
	IdleFor time.Duration
}

// What a sandbox woke from ([SandboxWoken.From]).
const (
	WokenFromPaused  = "paused"
	WokenFromStopped = "stopped"
)

// SandboxPaused does nothing.
func (NopObserver) SandboxPaused(context.Context, SandboxPaused) {}

// SandboxWoken does nothing.
func (NopObserver) SandboxWoken(context.Context, SandboxWoken) {}

// SandboxStopped does nothing.
func (NopObserver) SandboxStopped(context.Context, SandboxStopped) {}
