package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// ReapSink publishes the summary of each sweep (docs/events.md, reap.completed) through the
// outbox of the [Events] that handed it out.
type ReapSink struct {
	box              *Outbox
	prefix, engineID string
	log              *zap.Logger
}

// Publish enqueues the summary of the sweep res and returns its message (for its ID and
// subject). It never blocks on NATS: [Events.Close] says whether it was delivered.
// [ErrInvalidEvent] for a summary that must not be published, otherwise as [Outbox.Enqueue];
// either is also logged at Error, so a caller with nobody to tell may drop it.
func (s ReapSink) Publish(_ context.Context, res sandbox.ReapResult) (Message, error) {
	m, err := s.message(res)
	if err == nil {
		err = s.box.Enqueue(m)
	}
	if err != nil {
		if !errors.Is(err, ErrOutboxFull) { // the outbox said so already
			s.log.Error("reap summary NOT published", zap.Error(err))
		}
		return m, fmt.Errorf("reap summary: %w", err)
	}
	return m, nil
}

func (s ReapSink) message(res sandbox.ReapResult) (Message, error) {
	run := make([]byte, 16)
	_, _ = rand.Read(run)
	ev, err := ReapEvent(res, hex.EncodeToString(run), s.engineID, time.Now())
	if err != nil {
		return Message{}, err
	}
	return ReapMessage(s.prefix, ev)
}
