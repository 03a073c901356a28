package events

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// DefaultRecoveryEvery is how often [New]'s recovery loop publishes the pending windows whose
// proxies are gone (docs/events.md, across engine failures).
const DefaultRecoveryEvery = 30 * time.Second

// recoveryPass bounds one recovery pass: its inspections and its publications.
const recoveryPass = 20 * time.Second

// Recover runs one recovery pass: each pending window of this daemon whose proxy is absent is
// published (the stream drops it as a repeat if its drainer did publish it) and forgotten; one
// whose proxy exists is left to that proxy's next drain. It returns how many it published.
// Without a pending store (core NATS, or no [WithDaemon]) it does nothing.
func (e *Events) Recover(ctx context.Context) (int, error) {
	if e.pending == nil {
		return 0, nil
	}
	pctx, cancel := context.WithTimeout(ctx, recoveryPass)
	defer cancel()
	n, err := e.pending.Recover(pctx, e.o.daemon.Gone, func(ctx context.Context, w sandbox.EgressWindow) error {
		return e.box.EnqueueWindowWait(ctx, e.o.prefix, e.engineID, w)
	})
	if n > 0 {
		e.recLog.Info("pending egress windows of removed proxies published", zap.Int("count", n))
	}
	if err != nil {
		e.recLog.Warn("pending egress windows not all recovered; the next pass tries again", zap.Error(err))
	}
	return n, err
}

// recoverEvery runs a pass now and every d until the returned stop is called (stop waits for
// a pass in flight).
func (e *Events) recoverEvery(ctx context.Context, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			_, _ = e.Recover(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
