package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// keyLock serialises work per key: one holder at a time for each key, waiters bounded by
// ctx and a maximum wait. Entries are dropped when nobody holds or waits, so the map does not
// grow with every key ever seen.
type keyLock[K comparable] struct {
	mu sync.Mutex
	m  map[K]*keyLockEntry
}

type keyLockEntry struct {
	ch   chan struct{} // holds one token while the key is taken
	refs int           // holders plus waiters
}

// lock takes k, waiting at most maxWait (0 = no bound beyond ctx). Expiry of maxWait is a
// *TimeoutError; ctx's end is its own error. A free key is taken even when ctx has ended.
func (l *keyLock[K]) lock(ctx context.Context, k K, maxWait time.Duration, what string) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[K]*keyLockEntry)
	}
	e := l.m[k]
	if e == nil {
		e = &keyLockEntry{ch: make(chan struct{}, 1)}
		l.m[k] = e
	}
	e.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
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
