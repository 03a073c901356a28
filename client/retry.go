package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/messages"
)

// ErrOutcomeUnknown matches an [*OutcomeUnknownError] with errors.Is.
var ErrOutcomeUnknown = errors.New("client: the call's outcome is unknown")

// OutcomeUnknownError is the answer to a call that is not safe to repeat (an exec, run_code,
// run_program, reset, reclaim, collect_outputs, an upload chunk, a scope purge, a reap) whose
// request may have reached the engine when the way back was lost: this client's NATS
// connection dropped, or the engine's did, or the engine stopped answering, with the call in
// flight. The command may have run once or not at all; the client does not repeat it and
// does not make a result up. Err is what was seen (for an engine that stopped answering, an
// [*messages.EngineUnavailableError], so errors.Is(err, messages.ErrUnavailable) holds too).
type OutcomeUnknownError struct {
	Subject string
	Reason  string
	Err     error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("client: %s: outcome unknown: %s", e.Subject, e.Reason)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) hold.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// droppedError is an attempt abandoned because a connection dropped with it in flight; [do]
// repeats the call when it is safe to, and answers an [*OutcomeUnknownError] otherwise.
type droppedError struct {
	reason string
	err    error // what the engine said, if anything: unavailable (it stopped answering) or interrupted
}

func (e *droppedError) Error() string { return e.reason }

func (e *droppedError) Unwrap() error { return e.err }

// Why an attempt was abandoned, as the cause of its context.
var (
	errClientDropped     = errors.New("this client's NATS connection dropped with the call in flight")
	errEngineReconnected = errors.New("the engine's NATS connection was re-established with the call in flight")
)

// errNoResponders marks an attempt nobody was subscribed to take: nothing was delivered.
var errNoResponders = noResponders{}

type noResponders struct{}

func (noResponders) Error() string { return "" }

// Is makes errors.Is(err, nats.ErrNoResponders) hold for a call no engine took, so a caller
// can tell "no engine serves this prefix" from an engine answering engine_unavailable.
func (noResponders) Is(target error) bool { return target == nats.ErrNoResponders }

// repeatable holds the operations a call may be repeated for after a connection drop: running
// them twice leaves the sandbox as running them once does. An acquire is by key: the second
// returns the sandbox the first made (with Created false). A write of inline content writes the
// same bytes again; a remove of what is gone succeeds; a dispose of what is gone reports
// nothing undisposed. The others run a command, consume state (upload chunks, reset) or count
// what they did (scope purge, reap), and are never repeated.
var repeatable = map[string]bool{
	messages.SubjectDeclarationsT: true, messages.SubjectEngineDeclarationsT: true,
	messages.SubjectHealthT: true, messages.SubjectEngineHealthT: true,
	messages.SubjectAcquireT: true, messages.SubjectEngineAcquireT: true,
	messages.SubjectDisposeT: true, messages.SubjectEngineDisposeT: true,
	messages.SubjectStatFileT: true, messages.SubjectReadFileT: true, messages.SubjectListDirT: true,
	messages.SubjectDownloadChunkT: true, messages.SubjectWriteFileT: true, messages.SubjectRemoveT: true,
}

// WithDropRetry bounds how long a call that is safe to repeat keeps being repeated after a
// connection drop cut its attempt off — this client's connection, or the engine's (a NATS
// node killed under either), or an engine that briefly stopped answering while it
// reconnected (default 10 s; 0 never repeats). Past it the call fails with an
// [*messages.EngineUnavailableError]. Any other call cut off so answers an
// [*OutcomeUnknownError] at once. The ctx bounds both.
func WithDropRetry(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errOption("drop retry must not be negative, got %s", d)
		}
		o.dropRetry = d
		return nil
	}
}

// WithReconnectGrace bounds how long a call to one engine is sent again while nobody is
// subscribed to that engine's subject (default 1 s; 0 never): an engine whose NATS node died
// is unreachable for a moment while it reconnects to another. Nothing was delivered, so this
// holds for every call, an exec too. Past it the call fails with an
// [*messages.EngineUnavailableError]: the engine is gone, and its sandboxes with it.
func WithReconnectGrace(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errOption("reconnect grace must not be negative, got %s", d)
		}
		o.reconnectGrace = d
		return nil
	}
}
