package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/reaper"
)

// ReapSink publishes the summary of each sweep (docs/events.md, reap.completed) through the
// outbox of the [Events] that handed it out.
type ReapSink struct {
	box              *Outbox
	prefix, engineID string
	log              *zap.Logger
}

// SummaryOf is the summary of the sweep res, under a fresh random run ID.
func SummaryOf(res reaper.Result) ReapSummary {
	run := make([]byte, 16)
	_, _ = rand.Read(run)
	sum := ReapSummary{RunID: hex.EncodeToString(run), OlderThan: res.OlderThan, Scope: res.Scope, Cutoff: res.Cutoff,
		StartedAt: res.StartedAt, FinishedAt: res.FinishedAt, Disposed: res.Disposed, ProxiesRemoved: res.ProxiesRemoved,
		NetworksRemoved: res.NetworksRemoved}
	for _, f := range res.Failures {
		sum.Failures = append(sum.Failures, ReapFailure{Code: string(f.Code), Detail: f.Detail, ResourceID: f.ResourceID, ResourceKind: f.ResourceKind})
	}
	return sum
}

// Publish enqueues the summary of the sweep res and returns its message (for its ID and
// subject). It never blocks on NATS: [Events.Close] says whether it was delivered.
// [ErrInvalidEvent] for a summary that must not be published, otherwise as [Outbox.Enqueue];
// either is also logged at Error, so a caller with nobody to tell may drop it.
func (s ReapSink) Publish(_ context.Context, res reaper.Result) (Message, error) {
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

func (s ReapSink) message(res reaper.Result) (Message, error) {
	ev, err := SummaryOf(res).Event(s.engineID, time.Now())
	if err != nil {
		return Message{}, err
	}
	return ReapMessage(s.prefix, ev)
}
