package actors

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// TestWarmPoolRefillWaitsForAcquiresInFlight: a pool left short by a hand-out is not
// refilled while another acquire is in flight (a cold one held in its start): the loop
// defers, and makes the member only once that acquire has ended.
func TestWarmPoolRefillWaitsForAcquiresInFlight(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	events := make(chan string, 64)
	b := newTestBackend(t, f, WithWarmPool("img", 1), withPoolHook(func(ev string) { events <- ev }))
	if ev := <-events; ev != "made" {
		t.Fatalf("first loop event %q, want made", ev)
	}
	// A cold acquire (spec labels: no pool serves it), held in its start.
	cold := testSpec(t, sandbox.WithLabels(map[string]string{"x": "y"}))
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	f.onStart = func(string) error { // the pool is full: the next start is the cold acquire's
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
		return nil
	}
	coldDone := make(chan error, 1)
	go func() {
		_, err := b.Acquire(context.Background(), sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "cold"}, cold)
		coldDone <- err
	}()
	select {
	case <-held:
	case err := <-coldDone:
		t.Fatalf("the cold acquire ended before its start: %v", err)
	}
	// The hand-out leaves the pool short while the cold acquire is still in flight.
	if _, err := b.Acquire(context.Background(), testKey, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if got := b.WarmPoolSpares()["img"]; got != 0 {
		t.Fatalf("spares after the hand-out: %d", got)
	}
	if ev := <-events; ev != "deferred" {
		close(release)
		t.Fatalf("with an acquire in flight the loop said %q, want deferred", ev)
	}
	close(release)
	if err := <-coldDone; err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev == "made" {
			break
		}
	}
	b.Close(context.Background())
}
