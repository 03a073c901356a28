package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Events is one engine's event plumbing on one NATS connection, and the engine's observer
// (sandbox.Observer, observe.go): the publisher and its streams, the outbox in front of it,
// the pending-window store and its recovery loop. Each family of events has its sink:
// [Events.Windows] (egress windows), [Events.Reaps] (reap summaries), [Events.HostTools]
// (host-tool calls) and [Events.Audit] (every act). engine serve and engine reap build one
// each; a Go worker that embeds the engine builds one the same way and gets the same
// guarantees, recovery included.
type Events struct {
	nc       *nats.Conn
	o        options
	engineID string
	box      *Outbox
	auditBox *Outbox       // the audit stream's own queue: audit traffic never crowds windows out
	audit    *AuditSink    // on auditBox
	pending  *PendingStore // nil: windows are not recorded, nothing to recover
	log      *zap.Logger
	recLog   *zap.Logger
	stop     func() // stops the recovery loop
	once     sync.Once
}

// ensureWait bounds the creation of the streams at [New]: a NATS away for longer is not
// fatal, every publish ensures them again.
const ensureWait = 5 * time.Second

// New starts the events over nc, which the caller owns and closes after [Events.Close]. With
// JetStream (the default) it creates or updates the streams, so a consumer made before the
// first event finds them; with [WithDaemon] it opens the pending store and, unless
// [WithRecoveryEvery] is zero, starts the recovery loop, whose first pass runs now. It fails
// with [ErrInvalidEvent] for an option out of range, and when the daemon's identity, which
// scopes the pending records, cannot be read.
func New(ctx context.Context, nc *nats.Conn, opts ...Option) (*Events, error) {
	if nc == nil {
		return nil, fmt.Errorf("new events: %w: nil connection", ErrInvalidEvent)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("new events: %w", err)
		}
	}
	e := &Events{nc: nc, o: o, engineID: "unknown", log: o.log, recLog: o.log.Named("egress-pending"), stop: func() {}}
	if o.daemon != nil {
		id, err := o.daemon.EngineID(ctx)
		switch {
		case err == nil:
			e.engineID = id
		case !o.core:
			// Only the daemon that ran a proxy can confirm it gone, so the records are this
			// daemon's: without its identity there is no store to keep them in.
			return nil, fmt.Errorf("new events: the daemon's identity: %w", err)
		default:
			o.log.Warn("events will carry no daemon ID", zap.Error(err))
		}
	}
	var pub Publisher = NewCorePublisher(nc)
	if !o.core {
		js, err := NewJetStreamPublisher(nc, append(append([]JetStreamOpt{}, o.streamOpts...), WithSubjectPrefix(o.prefix))...)
		if err != nil {
			return nil, fmt.Errorf("new events: %w", err)
		}
		if nc.IsConnected() {
			ectx, cancel := context.WithTimeout(ctx, ensureWait)
			if err := js.EnsureStreams(ectx); err != nil {
				o.log.Warn("event streams not ensured yet; the first publish tries again", zap.Error(err))
			}
			cancel()
		}
		pub = js
		if o.daemon != nil {
			if e.pending, err = NewPendingStore(nc, o.prefix, WithPendingDaemon(e.engineID), WithPendingLogger(o.log.Named("egress-pending"))); err != nil {
				return nil, fmt.Errorf("new events: %w", err)
			}
		}
	}
	box, err := NewOutbox(pub, append([]OutboxOpt{WithOutboxLogger(o.log.Named("events"))}, o.outboxOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("new events: %w", err)
	}
	e.box = box
	auditOpts := append([]OutboxOpt{WithOutboxLogger(o.log.Named("audit")), WithCapacity(DefaultAuditCapacity)}, o.outboxOpts...)
	if e.auditBox, err = NewOutbox(pub, append(auditOpts, o.auditOpts...)...); err != nil {
		box.Close(ctx)
		return nil, fmt.Errorf("new events: %w", err)
	}
	e.audit = &AuditSink{box: e.auditBox, prefix: e.o.prefix, engineID: e.engineID, log: e.log.Named("audit")}
	if e.pending != nil && o.recoveryEvery > 0 {
		e.stop = e.recoverEvery(context.WithoutCancel(ctx), o.recoveryEvery)
	}
	return e, nil
}

// Windows is the egress family of the observer: each window the backend drains is recorded
// as pending before its proxy's removal (with a pending store) and enqueued once the removal
// succeeded or found the proxy absent. [Events.EgressPending] and [Events.EgressObserved]
// hand the windows to it; a backend may be handed it alone, as an observer of windows only.
func (e *Events) Windows() WindowSink {
	s := e.box.WindowSink(e.o.prefix, e.engineID)
	if e.pending != nil {
		s = s.WithPending(e.pending)
	}
	return s
}

// Reaps is the sink of reap summaries.
func (e *Events) Reaps() ReapSink {
	return ReapSink{box: e.box, prefix: e.o.prefix, engineID: e.engineID, log: e.log.Named("reap-events")}
}

// HostTools is the sink of host-tool call events (core NATS, best effort).
func (e *Events) HostTools() HostToolSink {
	return HostToolSink{nc: e.nc, prefix: e.o.prefix, log: e.log.Named("host-tool-events")}
}

// Audit is the sink of the audit stream: one event per act, on its own outbox. The acts reach
// it through the events' observer methods (observe.go).
func (e *Events) Audit() *AuditSink { return e.audit }

// Outbox is the outbox of the windows and reap summaries (for its [Outbox.Stats]).
func (e *Events) Outbox() *Outbox { return e.box }

// Stats sums the counts of both outboxes: the windows' and reaps', and the audit stream's.
func (e *Events) Stats() OutboxStats {
	a, b := e.box.Stats(), e.auditBox.Stats()
	return OutboxStats{Pending: a.Pending + b.Pending, Delivered: a.Delivered + b.Delivered, Refused: a.Refused + b.Refused,
		Failed: a.Failed + b.Failed, Attempts: a.Attempts + b.Attempts, Blocked: a.Blocked + b.Blocked,
		StreamRefusals: a.StreamRefusals + b.StreamRefusals}
}

// AuditStats counts the audit outbox alone.
func (e *Events) AuditStats() OutboxStats { return e.auditBox.Stats() }

// Pending is the pending-window store, nil when windows are not recorded (core NATS, or no
// [WithDaemon]).
func (e *Events) Pending() *PendingStore { return e.pending }

// EngineID is the daemon ID the events carry ("unknown" without [WithDaemon]).
func (e *Events) EngineID() string { return e.engineID }

// Prefix is the subject prefix of the events.
func (e *Events) Prefix() string { return e.o.prefix }

// Close stops the recovery loop (waiting for a pass in flight), stops taking events and
// delivers what the outbox holds until it is empty or ctx ends. [ErrUndelivered] when events
// were still held then (each is logged at Error with its ID). It does not close the
// connection. A second Close returns nil.
func (e *Events) Close(ctx context.Context) error {
	var err error
	e.once.Do(func() {
		e.stop()
		// The two outboxes drain side by side, each until it is empty or ctx ends.
		audit := make(chan int, 1)
		go func() { audit <- e.auditBox.Close(ctx) }()
		if n := e.box.Close(ctx) + <-audit; n > 0 {
			err = fmt.Errorf("%w: %d events", ErrUndelivered, n)
		}
		if e.pending != nil {
			e.pending.Close(ctx) // the records of the windows just delivered forgotten
		}
	})
	return err
}
