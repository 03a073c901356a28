package events

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Daemon is what the events ask of the Docker daemon the engine drives: its identity, which
// every event carries and the pending records are scoped to, and whether a proxy is gone,
// which only the daemon that ran it can say. The Docker backend (actors.Backend) implements
// it.
type Daemon interface {
	EngineID(ctx context.Context) (string, error)
	// Gone reports whether the daemon no longer has the container with this ID.
	Gone(ctx context.Context, containerID string) (bool, error)
}

// Option configures [New].
type Option func(*options) error

type options struct {
	prefix        string
	daemon        Daemon
	core          bool
	recoveryEvery time.Duration
	streamOpts    []JetStreamOpt
	outboxOpts    []OutboxOpt
	auditOpts     []OutboxOpt
	log           *zap.Logger
}

func defaultOptions() options {
	return options{prefix: DefaultSubjectPrefix, recoveryEvery: DefaultRecoveryEvery, log: zap.NewNop()}
}

// WithPrefix sets the subject prefix of every event (default [DefaultSubjectPrefix]); one that
// [CheckSubjectPrefix] refuses is refused.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if err := CheckSubjectPrefix(prefix); err != nil {
			return err
		}
		o.prefix = prefix
		return nil
	}
}

// WithDaemon names the Docker daemon the engine drives. Its ID stamps the events; with
// JetStream it also turns on the pending-window store and its recovery: each window is
// recorded before its proxy's removal, and one whose engine died before the stream
// acknowledged it is published once its proxy is confirmed absent. Without it the events
// carry the daemon ID "unknown" and nothing is recovered.
func WithDaemon(d Daemon) Option {
	return func(o *options) error {
		o.daemon = d
		return nil
	}
}

// WithCoreNATS publishes on core NATS (at most once per attempt, no streams, no duplicate
// suppression, no pending store) instead of the JetStream streams.
func WithCoreNATS() Option {
	return func(o *options) error {
		o.core = true
		return nil
	}
}

// WithRecoveryEvery sets how often the recovery loop runs (default [DefaultRecoveryEvery]);
// its first pass runs at [New]. Zero runs no loop: the caller runs [Events.Recover] itself.
func WithRecoveryEvery(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: recovery period %s", ErrInvalidEvent, d)
		}
		o.recoveryEvery = d
		return nil
	}
}

// WithStreams configures the JetStream publisher (its duplicate window, the egress stream's
// age); its subject prefix is always [WithPrefix]'s.
func WithStreams(opts ...JetStreamOpt) Option {
	return func(o *options) error {
		o.streamOpts = append(o.streamOpts, opts...)
		return nil
	}
}

// WithOutbox configures the outbox (its capacity, timeouts and backoff).
func WithOutbox(opts ...OutboxOpt) Option {
	return func(o *options) error {
		o.outboxOpts = append(o.outboxOpts, opts...)
		return nil
	}
}

// WithAuditOutbox configures the audit stream's outbox after [WithOutbox]'s options (its
// capacity defaults to [DefaultAuditCapacity]).
func WithAuditOutbox(opts ...OutboxOpt) Option {
	return func(o *options) error {
		o.auditOpts = append(o.auditOpts, opts...)
		return nil
	}
}

// WithLogger logs the events' work to l (default: nothing): the outbox as "events", the
// recovery as "egress-pending".
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.log = l
		}
		return nil
	}
}
