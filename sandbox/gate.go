package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// gate serialises work per key: one holder at a time for each key, waiters bounded by ctx
// and a maximum wait. Entries are dropped when nobody holds or waits, so the map does not
// grow with every key ever seen.
type gate[K comparable] struct {
	mu sync.Mutex
	m  map[K]*gateEntry
}

type gateEntry struct {
	ch   chan struct{} // holds one token while the key is taken
	refs int           // holders plus waiters
}

// lock takes k, waiting at most maxWait (0 = no bound beyond ctx). Expiry of maxWait is a
// *TimeoutError; ctx's end is its own error. A free key is taken even when ctx has ended.
func (g *gate[K]) lock(ctx context.Context, k K, maxWait time.Duration, what string) (func(), error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[K]*gateEntry)
	}
	e := g.m[k]
	if e == nil {
		e = &gateEntry{ch: make(chan struct{}, 1)}
		g.m[k] = e
	}
	e.refs++
	g.mu.Unlock()

	release := func() {
		g.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(g.m, k)
		}
		g.mu.Unlock()
	}
	// A free key is taken at once, whatever ctx says: ctx and maxWait bound waiting only.
	// Without this, select would pick at random between a free key and an ended ctx.
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	default:
	}
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("wait for %s: %w", what, ctx.Err())
	case <-expired:
		release()
		return nil, &TimeoutError{Op: "wait for " + what, Timeout: maxWait}
	}
}
