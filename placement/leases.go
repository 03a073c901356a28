package placement

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// leases is what an [Owner] holds in the placement bucket, by entry.
type leases struct {
	mu   sync.Mutex
	held map[string]heldLease
}

type heldLease struct {
	lease Lease
	key   sandbox.Key
	kind  string
	fence *fence
}

// fence ends when its lease does: lapsed unrenewed by this engine's clock, lost, or given up.
// Every call on the sandbox runs under it ([Owner.Fence]), so that an owner cut off from the
// cluster abandons the calls it admitted — a file call's freeze is lifted then — before a
// taker may claim the sandbox, a grace later.
type fence struct {
	ctx   context.Context
	end   context.CancelCauseFunc
	timer *time.Timer
}

// ErrLeaseEnded is the cause (context.Cause) of a fenced call's cancellation: this engine's
// lease on the sandbox ended during the call.
var ErrLeaseEnded = errors.New("this engine's placement lease on the sandbox ended")

func newFence(expires time.Time) *fence {
	ctx, end := context.WithCancelCause(context.Background())
	return &fence{ctx: ctx, end: end, timer: time.AfterFunc(time.Until(expires), func() { end(ErrLeaseEnded) })}
}

// extend moves the fence's end to expires; a fence that already ended stays ended, and a new
// one is returned in its place.
func (f *fence) extend(expires time.Time) *fence {
	if f.timer.Stop() {
		f.timer.Reset(time.Until(expires))
		return f
	}
	f.stop()
	return newFence(expires)
}

func (f *fence) stop() {
	f.timer.Stop()
	f.end(ErrLeaseEnded)
}

func newLeases() *leases { return &leases{held: map[string]heldLease{}} }

func (l *leases) put(key sandbox.Key, kind string, lease Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.held[lease.Entry]; ok {
		l.held[lease.Entry] = heldLease{lease: lease, key: key, kind: kind, fence: old.fence.extend(lease.Expires)}
		return
	}
	l.held[lease.Entry] = heldLease{lease: lease, key: key, kind: kind, fence: newFence(lease.Expires)}
}

// fenced returns ctx bounded by the fence of (key, kind)'s lease, and the function that
// releases it; ctx as it is without a lease.
func (l *leases) fenced(ctx context.Context, key sandbox.Key, kind string) (context.Context, func()) {
	l.mu.Lock()
	h, ok := l.held[EntryKey(key, kind)]
	l.mu.Unlock()
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(h.fence.ctx, func() { cancel(context.Cause(h.fence.ctx)) })
	return ctx, func() { stop(); cancel(nil) }
}

func (l *leases) get(key sandbox.Key, kind string) (Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.held[EntryKey(key, kind)]
	return h.lease, ok
}

// replace stores nl in place of the lease of its entry while that is still at revision rev.
func (l *leases) replace(rev uint64, nl Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.held[nl.Entry]; ok && cur.lease.Revision == rev {
		cur.lease = nl
		cur.fence = cur.fence.extend(nl.Expires)
		l.held[nl.Entry] = cur
	}
}

// take removes and returns the leases match accepts.
func (l *leases) take(match func(heldLease) bool) []heldLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []heldLease
	for e, h := range l.held {
		if match(h) {
			h.fence.stop()
			out = append(out, h)
			delete(l.held, e)
		}
	}
	return out
}

// count is how many leases are held.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// snapshot returns every lease, leaving them held.
func (l *leases) snapshot() []heldLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]heldLease, 0, len(l.held))
	for _, h := range l.held {
		out = append(out, h)
	}
	return out
}
