package actors

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// Reap runs one age-based sweep of the backend's engine (egress-and-reap.md §4): see
// [reaper.Reap] for the rules, the options and what the error means. It fails with
// [ErrReapInProgress] while another Reap of this backend runs.
// The sweep logs through the backend's logger and is reported to the backend's observer
// ([Backend.ReportTo]) once it ran. With an observer, every proxy is drained before its
// removal by the same inspected ID and its window is reported observed only after that removal
// succeeded or found it absent (§4.8), filed under the key its own labels carry; a
// [reaper.WithDrainer] among opts replaces that.
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration, opts ...reaper.Option) (sandbox.ReapResult, error) {
	if !b.reaping.CompareAndSwap(false, true) {
		return sandbox.ReapResult{}, ErrReapInProgress
	}
	defer b.reaping.Store(false)
	all := []reaper.Option{reaper.WithLogger(b.log)}
	if b.observing() {
		all = append(all, reaper.WithDrainer(reapDrainer{b}))
	}
	all = append(all, opts...)
	// The raw driver: the reaper never retries. A failed inventory call must stop the sweep,
	// and the next sweep is the retry.
	start := time.Now()
	res, err := reaper.Reap(ctx, b.engine.Driver, olderThan, all...)
	if err == nil {
		b.reportReap(ctx, start, res)
	}
	return res, err
}

// reapDrainer drains a proxy the reaper is about to remove through the backend's own drain
// (§3.2): expected ID = the inventory ID, no caller key, trigger "reap".
type reapDrainer struct{ b *Backend }

// Drain implements [reaper.Drainer].
func (d reapDrainer) Drain(ctx context.Context, proxy docker.Resource) reaper.Publication {
	w, id, err := d.b.drain(ctx, proxy.ID, proxy.ID, nil, egresslog.TriggerReap)
	if err != nil {
		d.b.log.Info("reap could not drain a proxy; it is removed unreported", zap.String("container_id", proxy.ID), zap.Error(err))
		return nil
	}
	if w == nil || id == "" {
		return nil
	}
	d.b.recordPending(ctx, w) // the reaper removes the proxy once Drain returned
	return func(ctx context.Context, outcome docker.RemoveOutcome) {
		if outcome == docker.Removed || outcome == docker.Absent {
			w.Removal = windowRemoval(outcome)
			d.b.deliverWindow(ctx, *w)
		}
	}
}
