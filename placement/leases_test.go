package placement

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A fence ends at its expiry unless extended first; one extended after it ended is replaced
// by a live one, and the ended one stays ended.
func TestFenceEndsWithItsLease(t *testing.T) {
	f := newFence(time.Now().Add(150 * time.Millisecond))
	time.Sleep(50 * time.Millisecond)
	f = f.extend(time.Now().Add(300 * time.Millisecond))
	time.Sleep(150 * time.Millisecond)
	if f.ctx.Err() != nil {
		t.Fatal("an extended fence ended at its first expiry")
	}
	select {
	case <-f.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the fence outlived its lease")
	}
	if !errors.Is(context.Cause(f.ctx), ErrLeaseEnded) {
		t.Fatalf("cause %v", context.Cause(f.ctx))
	}
	g := f.extend(time.Now().Add(time.Minute))
	if g == f || g.ctx.Err() != nil || f.ctx.Err() == nil {
		t.Fatal("extending an ended fence did not give a live new one")
	}
	g.stop()
	if g.ctx.Err() == nil {
		t.Fatal("a stopped fence is live")
	}
}
