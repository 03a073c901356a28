package natspub

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/egresslog"
)

// DefaultStoreWait bounds how long [WindowSink.EgressStore] holds a proxy's removal back while
// it waits for the stream's acknowledgement: long enough for a NATS restart or a cluster's
// leader election, short enough that a dispose during an outage still finishes (its window
// then waits in the outbox, in memory).
const DefaultStoreWait = 10 * time.Second

// WindowSink hands every window the engine drains to an outbox, stamped with the engine's
// daemon ID and published under a subject prefix. It is the backend's egress sink
// (actors.WithEgressSink): its method set is actors.StoringEgressSink's, without this package
// importing the engine.
type WindowSink struct {
	box              *Outbox
	prefix, engineID string
	wait             time.Duration
}

// WindowSink returns a sink that enqueues each drained window on b for prefix, as seen by
// the Docker daemon engineID, waiting at most [DefaultStoreWait] for each to be stored.
func (b *Outbox) WindowSink(prefix, engineID string) WindowSink {
	return WindowSink{box: b, prefix: prefix, engineID: engineID, wait: DefaultStoreWait}
}

// WithStoreWait returns s waiting at most d (positive) for each window to be stored.
func (s WindowSink) WithStoreWait(d time.Duration) WindowSink {
	if d > 0 {
		s.wait = d
	}
	return s
}

// EgressDrained enqueues w's event. It never blocks on NATS. A full outbox has already said
// so at Error; a window that cannot become an event is logged here, because the drain that
// handed it over has nobody else to tell.
func (s WindowSink) EgressDrained(_ context.Context, w egresslog.Window) {
	if err := s.box.EnqueueWindow(s.prefix, s.engineID, w); err != nil && !errors.Is(err, ErrOutboxFull) {
		s.box.log.Error("egress window not published", zap.String("proxy", w.ProxyName), zap.String("proxy_id", w.ProxyID), zap.Error(err))
	}
}

// EgressStore enqueues w's event before its proxy's removal and waits until the stream holds
// it (nil), at most the sink's store wait or until ctx ends. On any other answer the window
// is still held and retried by the outbox (unless it could not become an event or the outbox
// refused it, which is logged); the caller removes the proxy anyway, and only a crash before
// the outbox delivers loses it.
func (s WindowSink) EgressStore(ctx context.Context, w egresslog.Window) error {
	wctx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	err := s.box.StoreWindow(wctx, s.prefix, s.engineID, w)
	switch {
	case err == nil, errors.Is(err, ErrOutboxFull):
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		s.box.log.Warn("egress window not acknowledged yet; the outbox keeps it and the proxy is removed",
			zap.String("proxy_id", w.ProxyID), zap.Error(err))
	default:
		s.box.log.Error("egress window not published", zap.String("proxy", w.ProxyName), zap.String("proxy_id", w.ProxyID), zap.Error(err))
	}
	return err
}
