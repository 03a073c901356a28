package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Outbox is a bounded, in-memory queue in front of a [Publisher]. Enqueue never blocks on
// NATS: it keeps the message and returns. One worker publishes the messages in the order they
// were enqueued and retries the head with exponential backoff, with the same event ID, for as
// long as NATS is unreachable — so an event outlives a NATS outage and arrives when NATS
// returns. An event is never dropped silently: when the outbox is full Enqueue refuses it,
// logs at Error and counts the refusal; a message the server refuses for good (its payload is
// too large for the server or its stream, its subject invalid) is logged at Error and counted
// as failed; messages still
// held when Close gives up are logged at Error with their IDs. A stream that refuses to store
// the head ([ErrStreamRefused]: its limits reached with discard new) holds it and everything
// behind it until an operator acts: the outbox says so at Error once, counts it
// ([OutboxStats.Blocked], [OutboxStats.StreamRefusals]) and keeps retrying.
//
// The outbox lives in memory: a crash loses what it holds (§3.6 allows that; a persisted
// outbox would be the next step).
type Outbox struct {
	pub  Publisher
	o    outboxOptions
	log  *zap.Logger
	mu   sync.Mutex
	q    []entry
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	shut bool

	delivered, refused, failed, attempts, streamRefusals atomic.Int64
	// blocked is set while the head's last attempt was refused by the stream
	// ([ErrStreamRefused]): everything held waits behind it.
	blocked atomic.Bool
}

// OutboxStats counts what an outbox did.
type OutboxStats struct {
	Pending   int   // held now
	Delivered int64 // accepted by the publisher
	Refused   int64 // refused by Enqueue because the outbox was full
	Failed    int64 // refused for good by the server
	Attempts  int64 // publish attempts, retries included
	// Blocked is the events held now behind one the stream refuses to store
	// ([ErrStreamRefused]: its limits reached with discard new): all of Pending while the
	// head's last attempt was so refused, else 0. It lasts until an operator frees room in the
	// stream or raises its limits; meanwhile the outbox fills and then refuses new events.
	Blocked int
	// StreamRefusals counts the publish attempts the stream refused to store.
	StreamRefusals int64
}

// entry is one held message and, for [Outbox.EnqueueWait], who waits for its outcome.
type entry struct {
	m    Message
	done chan error  // nil when nobody waits; else buffered 1: nil delivered, else why not
	then func(error) // nil, or called by the worker with how m ended (as done would get)
}

// NewOutbox starts an outbox in front of pub. Close it to stop its worker.
func NewOutbox(pub Publisher, opts ...OutboxOpt) (*Outbox, error) {
	if pub == nil {
		return nil, fmt.Errorf("events: new outbox: %w: nil publisher", ErrInvalidEvent)
	}
	o := defaultOutboxOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	b := &Outbox{pub: pub, o: o, log: o.log.With(zap.String("op", "publish")),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b, nil
}

// Enqueue keeps m for publication and returns at once. [ErrOutboxFull] when the outbox holds
// its capacity (logged at Error and counted: the event is not kept), [ErrOutboxClosed] after
// Close.
func (b *Outbox) Enqueue(m Message) error {
	return b.enqueue(entry{m: m})
}

// EnqueueWait keeps m as [Outbox.Enqueue] does and waits until the publisher accepted it
// (nil: for JetStream the stream holds it, or held it already), the server refused it for
// good, or ctx ends. The message stays held and retried whatever the outcome of the wait: a
// wait that ends early says only that it is not known to be stored yet.
func (b *Outbox) EnqueueWait(ctx context.Context, m Message) error {
	e := entry{m: m, done: make(chan error, 1)}
	if err := b.enqueue(e); err != nil {
		return err
	}
	select {
	case err := <-e.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("events: %s not stored yet (still held and retried): %w", m.ID, ctx.Err())
	}
}

func (b *Outbox) enqueue(e entry) error {
	m := e.m
	b.mu.Lock()
	if b.shut {
		b.mu.Unlock()
		return ErrOutboxClosed
	}
	if len(b.q) >= b.o.capacity {
		b.mu.Unlock()
		n := b.refused.Add(1)
		b.log.Error("outbox full: event refused and NOT delivered",
			zap.String("subject", m.Subject), zap.String("event_id", m.ID), zap.Int("capacity", b.o.capacity), zap.Int64("refused_total", n))
		return fmt.Errorf("%w: %s", ErrOutboxFull, m.ID)
	}
	b.q = append(b.q, e)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns the outbox's counters.
func (b *Outbox) Stats() OutboxStats {
	b.mu.Lock()
	pending := len(b.q)
	b.mu.Unlock()
	st := OutboxStats{Pending: pending, Delivered: b.delivered.Load(), Refused: b.refused.Load(),
		Failed: b.failed.Load(), Attempts: b.attempts.Load(), StreamRefusals: b.streamRefusals.Load()}
	if b.blocked.Load() {
		st.Blocked = pending
	}
	return st
}

// Close stops taking messages and keeps delivering what is held until it is empty or ctx
// ends; what is then still held is logged at Error, one line per event ID, and returned as
// the count. Close waits for the worker to stop.
func (b *Outbox) Close(ctx context.Context) (undelivered int) {
	b.mu.Lock()
	already := b.shut
	b.shut = true
	b.mu.Unlock()
	if !already {
		go func() {
			select {
			case <-ctx.Done():
			case <-b.done:
			}
			close(b.stop)
		}()
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	<-b.done
	b.mu.Lock()
	left := b.q
	b.q = nil
	b.mu.Unlock()
	for _, e := range left {
		b.log.Error("outbox closed with an undelivered event", zap.String("subject", e.m.Subject), zap.String("event_id", e.m.ID))
		e.finish(ErrOutboxClosed)
	}
	return len(left)
}

// run is the worker: publish the head, retry it until it is accepted, then the next.
func (b *Outbox) run() {
	defer close(b.done)
	for {
		e, ok := b.head()
		if !ok {
			b.mu.Lock()
			shut := b.shut
			b.mu.Unlock()
			if shut {
				return
			}
			select {
			case <-b.wake:
				continue
			case <-b.stop:
				return
			}
		}
		ok, err := b.deliver(e.m)
		if !ok {
			return
		}
		b.pop()
		e.finish(err)
	}
}

// finish tells e's waiter, if any, how its message ended.
func (e entry) finish(err error) {
	if e.then != nil {
		e.then(err)
	}
	if e.done != nil {
		e.done <- err
	}
}

func (b *Outbox) head() (entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.q) == 0 {
		return entry{}, false
	}
	return b.q[0], true
}

func (b *Outbox) pop() {
	b.mu.Lock()
	b.q = b.q[1:]
	b.mu.Unlock()
}

// deliver publishes m until it is accepted (true, nil) or refused for good (true and the
// refusal: take it off the queue either way) or the outbox is stopped (false: keep it).
func (b *Outbox) deliver(m Message) (bool, error) {
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(b.o.minBackoff), backoff.WithMaxInterval(b.o.maxBackoff),
		backoff.WithMaxElapsedTime(0))
	start := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), b.o.attemptTimeout)
		go func() {
			select {
			case <-b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		b.attempts.Add(1)
		err := b.pub.Publish(ctx, m)
		cancel()
		if err == nil {
			b.delivered.Add(1)
			b.unblocked(m)
			if attempt > 1 {
				b.log.Info("event delivered after retries", zap.String("subject", m.Subject), zap.String("event_id", m.ID),
					zap.Int("attempt", attempt), zap.Duration("elapsed", time.Since(start)))
			}
			return true, nil
		}
		if permanent(err) {
			b.failed.Add(1)
			b.unblocked(m)
			b.log.Error("event refused by the server and NOT delivered", zap.String("subject", m.Subject),
				zap.String("event_id", m.ID), zap.Error(err))
			return true, err
		}
		switch {
		case errors.Is(err, ErrStreamRefused):
			b.streamBlocked(m, err)
		case attempt == 1:
			b.log.Warn("event not delivered yet; kept and retried", zap.String("subject", m.Subject),
				zap.String("event_id", m.ID), zap.Error(err))
		default:
			b.log.Debug("event retry failed", zap.String("event_id", m.ID), zap.Int("attempt", attempt), zap.Error(err))
		}
		select {
		case <-time.After(bo.NextBackOff()):
		case <-b.stop:
			return false, nil
		}
	}
}

// streamBlocked counts an attempt the stream refused to store and says so at Error once per
// run of refusals: it lasts until an operator acts, and everything held waits behind it.
func (b *Outbox) streamBlocked(m Message, err error) {
	n := b.streamRefusals.Add(1)
	if b.blocked.Swap(true) {
		b.log.Debug("the stream still refuses the event", zap.String("event_id", m.ID), zap.Int64("stream_refusals_total", n), zap.Error(err))
		return
	}
	b.mu.Lock()
	held := len(b.q)
	b.mu.Unlock()
	b.log.Error("the stream refuses to store events: they are held and retried, and the outbox refuses new ones once full; free room in the stream or raise its limits",
		zap.String("subject", m.Subject), zap.String("event_id", m.ID), zap.Int("held", held), zap.Int("capacity", b.o.capacity), zap.Error(err))
}

// unblocked ends a run of stream refusals once the head has left the queue.
func (b *Outbox) unblocked(m Message) {
	if b.blocked.Swap(false) {
		b.log.Info("the stream takes events again", zap.String("subject", m.Subject), zap.String("event_id", m.ID),
			zap.Int64("stream_refusals_total", b.streamRefusals.Load()))
	}
}

// permanent is the outbox's one classifier: only answers that no retry can change.
func permanent(err error) bool {
	return errors.Is(err, ErrInvalidEvent) || errorsIsAny(err, permanentNATS...) || overStreamMax(err)
}

// EnqueueWindow builds w's event for the engine engineID, stamped now, encodes it for prefix
// and enqueues it: the one call a sink needs once the proxy's removal succeeded or found it
// absent. [ErrInvalidEvent] for a window that must not be published (nothing is
// enqueued), otherwise as [Outbox.Enqueue].
func (b *Outbox) EnqueueWindow(prefix, engineID string, w sandbox.EgressWindow) error {
	m, err := windowMessage(prefix, engineID, w)
	if err != nil {
		return err
	}
	return b.Enqueue(m)
}

// EnqueueWindowWait is [Outbox.EnqueueWindow] that waits as [Outbox.EnqueueWait] does, for a
// caller that may block until the stream holds the window. Like EnqueueWindow it is called
// only once the proxy's removal succeeded or found it absent (§3.4), never before.
func (b *Outbox) EnqueueWindowWait(ctx context.Context, prefix, engineID string, w sandbox.EgressWindow) error {
	m, err := windowMessage(prefix, engineID, w)
	if err != nil {
		return err
	}
	return b.EnqueueWait(ctx, m)
}

// EnqueueWindowThen is [Outbox.EnqueueWindow] that calls then, from the outbox's worker, with
// how the window ended: nil once the publisher accepted it, the refusal, or [ErrOutboxClosed].
// then is not called when the window is not enqueued (the error is returned instead).
func (b *Outbox) EnqueueWindowThen(prefix, engineID string, w sandbox.EgressWindow, then func(error)) error {
	m, err := windowMessage(prefix, engineID, w)
	if err != nil {
		return err
	}
	return b.enqueue(entry{m: m, then: then})
}

func windowMessage(prefix, engineID string, w sandbox.EgressWindow) (Message, error) {
	ev, err := EgressEvent(w, engineID, time.Now())
	if err != nil {
		return Message{}, err
	}
	return EgressMessage(prefix, ev)
}
