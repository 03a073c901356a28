package egresslog

import "errors"

// ErrInvalidEvent: a window or summary that must not be published, or a subject prefix that
// is not plain tokens. Nothing was sent. (errors.go holds the grammar's error; this is the
// event side's. Package natspub, which delivers the events, returns it wrapped for the same
// refusals and for a publisher or outbox option out of range.)
var ErrInvalidEvent = errors.New("egresslog: invalid event")
