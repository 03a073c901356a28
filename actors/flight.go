package actors

import (
	"context"
	"sync"
	"time"
)

// flight shares one engine question among callers that ask at once: a caller joins a call
// only if that call started after the caller began, so every answer it gets was read after
// it asked (cold acquires must re-read the daemon, not reuse an old answer).
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
		c = &flightCall[T]{started: time.Now(), done: make(chan struct{})}
		f.cur[key] = c
		f.mu.Unlock()
		c.val, c.err = fn(context.WithoutCancel(ctx))
		close(c.done)
		f.mu.Lock()
		if f.cur[key] == c {
			delete(f.cur, key)
		}
		f.mu.Unlock()
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
