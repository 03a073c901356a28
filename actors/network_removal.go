package actors

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// A disposal removes a sandbox's internal network after its reply (docs/operations.md,
// "What a disposal's answer promises"). By then the proxy and the workload are gone by ID and
// the proxy's window is published; what is left is an empty network whose removal the caller
// need not wait for. The backend keeps every such removal until it finished: an acquire of
// the same sandbox waits for it before it looks at the name (so it never adopts a network on
// its way out), a second removal of the name waits for the first, and Close waits for all. A
// removal that fails is logged and the network, labelled and empty, is the reaper's.

// networkRemovals are the removals under way, by network name.
type networkRemovals struct {
	mu      sync.Mutex
	pending map[string]chan struct{}
	wg      sync.WaitGroup
}

// removeNetworkAfter runs remove for the network name on its own goroutine, after any removal
// of that name still under way, bounded by the command timeout and detached from the caller.
func (b *Backend) removeNetworkAfter(name string, remove func(ctx context.Context) error) {
	r := &b.netRemovals
	r.mu.Lock()
	if r.pending == nil {
		r.pending = map[string]chan struct{}{}
	}
	before := r.pending[name]
	done := make(chan struct{})
	r.pending[name] = done
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			if r.pending[name] == done {
				delete(r.pending, name)
			}
			r.mu.Unlock()
			close(done)
		}()
		if before != nil {
			<-before
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.commandTimeout())
		defer cancel()
		if err := remove(ctx); err != nil {
			b.log.Warn("remove egress network after disposal; left to the reaper", zap.String("network", name), zap.Error(err))
		}
	}()
}

// awaitNetworkRemoval waits for a removal of the network name under way, if any.
func (b *Backend) awaitNetworkRemoval(ctx context.Context, name string) error {
	r := &b.netRemovals
	r.mu.Lock()
	done := r.pending[name]
	r.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitNetworkRemovals waits for every removal under way (Close).
func (b *Backend) awaitNetworkRemovals() { b.netRemovals.wg.Wait() }

// AwaitTeardowns waits until the network removals that disposals left running after their
// replies have finished (removed, or failed and logged for the reaper), or ctx ends. Close
// waits for them too; this is for a caller that wants the daemon settled and the backend kept.
func (b *Backend) AwaitTeardowns(ctx context.Context) error {
	r := &b.netRemovals
	for {
		r.mu.Lock()
		var done chan struct{}
		for _, d := range r.pending {
			done = d
			break
		}
		r.mu.Unlock()
		if done == nil {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
