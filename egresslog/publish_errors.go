package egresslog

import "errors"

// Errors of event building and publishing. (errors.go holds the grammar's; these are the
// wire side's and live next to it.)
var (
	// ErrInvalidEvent: a window or summary that must not be published, or a subject prefix
	// that is not plain tokens. Nothing was sent.
	ErrInvalidEvent = errors.New("egresslog: invalid event")
	// ErrNotConnected: the NATS connection is not connected at publish time; the message was
	// not handed to the client (an [Outbox] keeps it and retries).
	ErrNotConnected = errors.New("egresslog: nats not connected")
	// ErrOutboxFull: the outbox is at its capacity and refused the event. The refusal is
	// logged at Error and counted ([OutboxStats.Refused]); the caller holds the only copy.
	ErrOutboxFull = errors.New("egresslog: outbox full, event refused")
	// ErrOutboxClosed: the outbox is closed and takes nothing more.
	ErrOutboxClosed = errors.New("egresslog: outbox closed")
)
