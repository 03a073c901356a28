package events

import "errors"

var (
	// ErrInvalidEvent: a window or summary that must not be published, a subject prefix that
	// is not plain tokens, or an option out of range. Nothing was sent.
	ErrInvalidEvent = errors.New("events: invalid event")
	// ErrNotConnected: the NATS connection is not connected at publish time; the message was
	// not handed to the client (an [Outbox] keeps it and retries).
	ErrNotConnected = errors.New("events: nats not connected")
	// ErrOutboxFull: the outbox is at its capacity and refused the event. The refusal is
	// logged at Error and counted ([OutboxStats.Refused]); the caller holds the only copy.
	ErrOutboxFull = errors.New("events: outbox full, event refused")
	// ErrOutboxClosed: the outbox is closed and takes nothing more.
	ErrOutboxClosed = errors.New("events: outbox closed")
	// ErrStreamRefused: the stream refused to store the event: its limits are reached and it
	// discards new messages, its store is failing, or the server's JetStream resources are
	// exhausted. Only an operator's act (or old messages ageing out) ends it; an [Outbox] holds
	// the event, retries it, and counts and reports the stall ([OutboxStats.Blocked]).
	ErrStreamRefused = errors.New("events: the stream refuses to store the event")
	// ErrUndelivered: [Events.Close] gave up with events still held; they are lost.
	ErrUndelivered = errors.New("events: events not delivered")
)
