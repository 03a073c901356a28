package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/egresslog/natspub"
)

// pendingRecoveryEvery is how often engine serve publishes the pending windows whose proxies
// are gone (docs/events.md, across engine failures).
const pendingRecoveryEvery = 30 * time.Second

// pendingRecoveryPass bounds one recovery pass: its inspections and its publications.
const pendingRecoveryPass = 20 * time.Second

// inspector is the part of the driver a recovery needs: is the proxy still there.
type inspector interface {
	Inspect(ctx context.Context, target string) (docker.ContainerInfo, error)
}

// pendingRecovery publishes through box the pending windows of prefix whose proxies drv no
// longer has.
type pendingRecovery struct {
	store            *natspub.PendingStore
	drv              inspector
	box              *natspub.Outbox
	prefix, engineID string
	log              *zap.Logger
}

func newPendingRecovery(ctx context.Context, nc *nats.Conn, drv interface {
	inspector
	engineIdentity
}, box *natspub.Outbox, prefix string, log *zap.Logger) (pendingRecovery, error) {
	// Only the daemon that ran a proxy can confirm it gone, so the records are this daemon's.
	engineID, err := drv.EngineID(ctx)
	if err != nil {
		return pendingRecovery{}, fmt.Errorf("egress pending windows: the daemon's identity: %w", err)
	}
	store, err := natspub.NewPendingStore(nc, prefix, natspub.WithPendingDaemon(engineID))
	if err != nil {
		return pendingRecovery{}, fmt.Errorf("egress pending windows: %w", err)
	}
	return pendingRecovery{store: store, drv: drv, box: box, prefix: prefix, engineID: engineID, log: log.Named("egress-pending")}, nil
}

// run is one pass: each pending window whose proxy is absent is published (the stream drops
// it as a repeat if its drainer did publish it) and forgotten; one whose proxy exists is left
// to that proxy's next drain.
func (r pendingRecovery) run(ctx context.Context) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, pendingRecoveryPass)
	defer cancel()
	n, err := r.store.Recover(pctx, func(ctx context.Context, id string) (bool, error) {
		_, err := r.drv.Inspect(ctx, id)
		if errors.Is(err, docker.ErrNotFound) {
			return true, nil
		}
		return false, err
	}, func(ctx context.Context, w egresslog.Window) error {
		return r.box.EnqueueWindowWait(ctx, r.prefix, r.engineID, w)
	})
	if n > 0 {
		r.log.Info("pending egress windows of removed proxies published", zap.Int("count", n))
	}
	if err != nil {
		r.log.Warn("pending egress windows not all recovered; the next pass tries again", zap.Error(err))
	}
	return n, err
}

// every runs a pass now and every d until stop is called (stop waits for a pass in flight).
func (r pendingRecovery) every(ctx context.Context, d time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			_, _ = r.run(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
