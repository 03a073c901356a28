package natspub

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/egresslog"
)

// WindowSink hands every window the engine drains to an outbox, stamped with the engine's
// daemon ID and published under a subject prefix. It is the backend's egress sink
// (actors.WithEgressSink): its method set is actors.EgressSink's, without this package
// importing the engine.
type WindowSink struct {
	box              *Outbox
	prefix, engineID string
}

// WindowSink returns a sink that enqueues each drained window on b for prefix, as seen by
// the Docker daemon engineID.
func (b *Outbox) WindowSink(prefix, engineID string) WindowSink {
	return WindowSink{box: b, prefix: prefix, engineID: engineID}
}

// EgressDrained enqueues w's event. It never blocks on NATS. A full outbox has already said
// so at Error; a window that cannot become an event is logged here, because the drain that
// handed it over has nobody else to tell.
func (s WindowSink) EgressDrained(_ context.Context, w egresslog.Window) {
	if err := s.box.EnqueueWindow(s.prefix, s.engineID, w); err != nil && !errors.Is(err, ErrOutboxFull) {
		s.box.log.Error("egress window not published", zap.String("proxy", w.ProxyName), zap.String("proxy_id", w.ProxyID), zap.Error(err))
	}
}
