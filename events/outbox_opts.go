package events

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Outbox defaults.
const (
	DefaultOutboxCapacity = 4096
	// DefaultAuditCapacity bounds the audit outbox: about 16 s of 2,000 events/s held while
	// NATS is away, at roughly 1 KiB each.
	DefaultAuditCapacity  = 32768
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMinBackoff     = 100 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
)

// OutboxOpt configures an [Outbox].
type OutboxOpt func(*outboxOptions) error

type outboxOptions struct {
	capacity       int
	attemptTimeout time.Duration
	minBackoff     time.Duration
	maxBackoff     time.Duration
	log            *zap.Logger
}

func defaultOutboxOptions() outboxOptions {
	return outboxOptions{capacity: DefaultOutboxCapacity, attemptTimeout: DefaultAttemptTimeout,
		minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff, log: zap.NewNop()}
}

// WithCapacity bounds how many messages the outbox holds (default [DefaultOutboxCapacity]).
func WithCapacity(n int) OutboxOpt {
	return func(o *outboxOptions) error {
		if n <= 0 {
			return fmt.Errorf("%w: outbox capacity %d", ErrInvalidEvent, n)
		}
		o.capacity = n
		return nil
	}
}

// WithAttemptTimeout bounds one publish attempt (default [DefaultAttemptTimeout]).
func WithAttemptTimeout(d time.Duration) OutboxOpt {
	return func(o *outboxOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: attempt timeout %s", ErrInvalidEvent, d)
		}
		o.attemptTimeout = d
		return nil
	}
}

// WithBackoff sets the first and the longest pause between retries of one message (defaults
// [DefaultMinBackoff], [DefaultMaxBackoff]). Retries never give up while the outbox is open.
func WithBackoff(first, longest time.Duration) OutboxOpt {
	return func(o *outboxOptions) error {
		if first <= 0 || longest < first {
			return fmt.Errorf("%w: backoff %s..%s", ErrInvalidEvent, first, longest)
		}
		o.minBackoff, o.maxBackoff = first, longest
		return nil
	}
}

// WithOutboxLogger logs the outbox's work to l (default: nothing). Refusals and losses are
// logged at Error. ([New] gives its outbox its own logger.)
func WithOutboxLogger(l *zap.Logger) OutboxOpt {
	return func(o *outboxOptions) error {
		if l != nil {
			o.log = l
		}
		return nil
	}
}
