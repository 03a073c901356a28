package placement

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
)

// renewParallel bounds the renewals in flight at once: one round trip each (0.4 ms on a
// replicated cluster, docs/benchmarks.md), so done one by one a few thousand sandboxes would
// outlast a third of the lease.
const renewParallel = 16

// renewer renews every lease at a third of the lease time until Stop. A lease found lost is
// dropped and the engine told ([Hooks].Lost), so that later calls on the sandbox are refused.
func (ow *Owner) renewer() {
	defer ow.done.Done()
	t := time.NewTicker(ow.o.store.Lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ow.stop:
			return
		case <-t.C:
		}
		slots := make(chan struct{}, renewParallel)
		var wg sync.WaitGroup
		for _, h := range ow.leases.snapshot() {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				ow.renew(h)
			}()
		}
		wg.Wait()
	}
}

// renew renews one lease and records the outcome.
func (ow *Owner) renew(h heldLease) {
	p := ow.o.store
	ctx, cancel := context.WithTimeout(context.Background(), p.Lease()/3)
	l, err := p.Renew(ctx, h.lease)
	cancel()
	switch {
	case err == nil:
		ow.leases.replace(h.lease.Revision, l)
	case errors.Is(err, ErrNotOwner) && ow.adoptOwnWrite(h):
		// A write of this engine's own moved the revision: an instance recorded, or an earlier
		// renewal whose answer timed out after the bucket took it. The lease now holds the
		// entry's revision, so the next renewal is on the right one.
	case errors.Is(err, ErrNotOwner):
		// Only when the lease held is still the one renewed: a claim of this engine's own may
		// have replaced it meanwhile, moving the revision under this renewal.
		if len(ow.leases.take(func(x heldLease) bool {
			return x.lease.Entry == h.lease.Entry && x.lease.Revision == h.lease.Revision
		})) == 0 {
			return
		}
		ow.log.Warn("lost a sandbox's placement lease; its handles are dropped", zap.Stringer("key", h.key),
			zap.String("kind", h.kind), zap.Error(err))
		if ow.o.hooks.Lost != nil {
			ow.o.hooks.Lost(h.key, h.kind)
		}
	default:
		ow.log.Debug("renew a placement lease", zap.String("entry", h.lease.Entry), zap.Error(err))
	}
}

// adoptOwnWrite reads the bucket's entry of h after a renewal of h was refused and reports
// whether it still names this engine, unexpired: then a write of this engine's own moved the
// revision, and h's lease takes the entry's revision, expiry and instance (unless another of
// this engine's writes already replaced it). Only this engine writes entries naming it, and
// it computes each expiry from the time it sent the write, so the adopted expiry fences as a
// renewal's own does. Without the adoption, a renewal that timed out after the bucket took it
// left the lease a revision behind: every later renewal was refused, and once the entry
// expired the sandbox was dropped as lost, though nobody else had written it.
func (ow *Owner) adoptOwnWrite(h heldLease) bool {
	p := ow.o.store
	ctx, cancel := context.WithTimeout(context.Background(), p.Lease()/3)
	defer cancel()
	r, ok, err := p.GetSince(ctx, h.key, h.kind, h.lease.Revision+1)
	if err != nil || !ok || r.Engine != ow.engine || r.Revision <= h.lease.Revision || !time.Now().Before(r.Expires) {
		return false
	}
	ow.leases.replace(h.lease.Revision, Lease{Entry: h.lease.Entry, Engine: ow.engine, Revision: r.Revision,
		Expires: r.Expires, Instance: r.Instance})
	return true
}
