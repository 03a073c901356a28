package natspub

import "errors"

// Errors of delivery. A refusal of the event itself (an invalid window, summary, prefix or
// option) is egresslog's: it matches [egresslog.ErrInvalidEvent] with errors.Is.
var (
	// ErrNotConnected: the NATS connection is not connected at publish time; the message was
	// not handed to the client (an [Outbox] keeps it and retries).
	ErrNotConnected = errors.New("natspub: nats not connected")
	// ErrOutboxFull: the outbox is at its capacity and refused the event. The refusal is
	// logged at Error and counted ([OutboxStats.Refused]); the caller holds the only copy.
	ErrOutboxFull = errors.New("natspub: outbox full, event refused")
	// ErrOutboxClosed: the outbox is closed and takes nothing more.
	ErrOutboxClosed = errors.New("natspub: outbox closed")
)
