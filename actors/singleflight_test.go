package actors

import (
	"context"
	"testing"
	"time"
)

// A finished call answers a caller that began before it started (the same acquire asking
// again), never one that began after it.
func TestFlightReusesOnlyAnswersReadAfterTheCallerBegan(t *testing.T) {
	var f flight[int]
	calls := 0
	ask := func(context.Context) (int, error) { calls++; return calls, nil }
	ctx := context.Background()
	began := time.Now()
	if v, _ := f.do(ctx, "", began, ask); v != 1 {
		t.Fatalf("first answer %d", v)
	}
	if v, _ := f.do(ctx, "", began, ask); v != 1 || calls != 1 {
		t.Fatalf("the same caller asked again: answer %d after %d calls, want the first call's", v, calls)
	}
	if v, _ := f.do(ctx, "", time.Now(), ask); v != 2 || calls != 2 {
		t.Fatalf("a caller that began after the call got answer %d after %d calls, want a new call", v, calls)
	}
	if v, _ := f.do(ctx, "other", began, ask); v != 3 {
		t.Fatalf("another key shared a call: %d", v)
	}
}
