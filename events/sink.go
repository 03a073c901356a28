package events

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// WindowSink hands every window the engine drains to an outbox, stamped with the engine's
// daemon ID and published under a subject prefix: the egress family of the events' observer
// ([Events.EgressPending], [Events.EgressObserved]), an observer of egress windows alone
// that a backend may be handed itself.
type WindowSink struct {
	sandbox.NopObserver
	box              *Outbox
	prefix, engineID string
	pending          *PendingStore
}

// pendingWait bounds each pending record's write and removal: a NATS away for longer only
// reopens the gap the record closes (the window is then in the outbox alone), never holds a
// proxy's removal back for long.
const pendingWait = 5 * time.Second

// WindowSink returns a sink that enqueues each drained window on b for prefix, as seen by
// the Docker daemon engineID.
func (b *Outbox) WindowSink(prefix, engineID string) WindowSink {
	return WindowSink{box: b, prefix: prefix, engineID: engineID}
}

// WithPending returns s recording each window in p before its proxy's removal and forgetting
// it once the stream acknowledged the window's event (docs/events.md, across engine failures).
func (s WindowSink) WithPending(p *PendingStore) WindowSink {
	s.pending = p
	return s
}

// EgressPending records w, drained and its proxy not yet removed, as pending: a record, not
// an event. It waits at most pendingWait; a failure is logged and the removal follows.
func (s WindowSink) EgressPending(ctx context.Context, w sandbox.EgressWindow) {
	if s.pending == nil {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingWait)
	defer cancel()
	if err := s.pending.Put(pctx, w); err != nil {
		s.box.log.Warn("egress window not recorded as pending; an engine dying between its proxy's removal and its publication loses it",
			zap.String("proxy_id", w.ProxyID), zap.Error(err))
	}
}

// EgressObserved enqueues w's event, its proxy removed or absent, and with a pending store
// forgets w's record once the stream acknowledged the event. It never blocks on NATS. A full
// outbox has already said so at Error; a window that cannot become an event is logged here,
// because the drain that handed it over has nobody else to tell.
func (s WindowSink) EgressObserved(_ context.Context, w sandbox.EgressWindow) {
	var err error
	if s.pending == nil {
		err = s.box.EnqueueWindow(s.prefix, s.engineID, w)
	} else {
		err = s.box.EnqueueWindowThen(s.prefix, s.engineID, w, func(delivered error) {
			if delivered == nil { // else kept for the recovery
				s.pending.Forget(w.ProxyID) // on the store's worker: the outbox's goes on at once
			}
		})
	}
	if err != nil && !errors.Is(err, ErrOutboxFull) {
		s.box.log.Error("egress window not published", zap.String("proxy", w.ProxyName), zap.String("proxy_id", w.ProxyID), zap.Error(err))
	}
}
