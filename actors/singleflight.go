package actors

import (
	"context"
	"sync"
	"time"
)

// flight shares one engine question among callers: a caller joins a call — under way or
// done — only if that call started after the caller began, so every answer it gets was read
// after it asked (cold acquires must re-read the daemon, not reuse an old answer), and one
// acquire that asks twice (the egress topology's OS check, then the workload's) asks once.
// A finished call is kept for flightKeep, long enough for the acquire that made it.
type flight[T any] struct {
	mu  sync.Mutex
	cur map[string]*flightCall[T]
}

type flightCall[T any] struct {
	started time.Time
	done    chan struct{}
	val     T
	err     error
}

// do returns fn's answer for key, from a call started no earlier than since.
func (f *flight[T]) do(ctx context.Context, key string, since time.Time, fn func(context.Context) (T, error)) (T, error) {
	f.mu.Lock()
	if f.cur == nil {
		f.cur = map[string]*flightCall[T]{}
	}
	c := f.cur[key]
	if c == nil || c.started.Before(since) {
		now := time.Now()
		for k, old := range f.cur { // finished calls no acquire still under way can use
			if now.Sub(old.started) > flightKeep && isDone(old.done) {
				delete(f.cur, k)
			}
		}
		c = &flightCall[T]{started: now, done: make(chan struct{})}
		f.cur[key] = c
		f.mu.Unlock()
		c.val, c.err = fn(context.WithoutCancel(ctx))
		close(c.done)
		return c.val, c.err
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// flightKeep is how long a finished call stays joinable.
const flightKeep = time.Minute

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
