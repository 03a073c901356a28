package placement_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// laggingReplica is a bucket whose reads, while stale is set, are answered as a replica that has
// not applied the stream's last writes answers a direct get: with an older entry. The writes
// go to the bucket itself.
type laggingReplica struct {
	jetstream.KeyValue
	mu    sync.Mutex
	stale jetstream.KeyValueEntry
}

func (r *laggingReplica) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	r.mu.Lock()
	stale := r.stale
	r.mu.Unlock()
	if stale != nil && stale.Key() == key {
		return stale, nil
	}
	return r.KeyValue.Get(ctx, key)
}

func (r *laggingReplica) lag(e jetstream.KeyValueEntry) {
	r.mu.Lock()
	r.stale = e
	r.mu.Unlock()
}

// TestReleaseKeyOutwaitsALaggingReplica: a dispose's release whose lease a renewal of the
// engine's own moved reads the entry again to release it on its revision now. Reads are direct
// gets, which any replica answers; one that has not applied the renewal answers with the lease's
// own, older revision, on which the release is refused. The release reads again until the
// renewal shows (here: once the replica catches up, 200 ms later) and deletes the entry.
func TestReleaseKeyOutwaitsALaggingReplica(t *testing.T) {
	noLeaks(t)
	s := store(t, embedded(t), "e1")
	replica := &laggingReplica{KeyValue: placement.Bucket(s)}
	placement.SetBucket(s, replica)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	key := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	held, _, err := s.Claim(ctx, key, "py")
	if err != nil {
		t.Fatal(err)
	}
	old, err := replica.KeyValue.Get(ctx, held.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, held); err != nil { // the renewal in flight the dispose did not see
		t.Fatal(err)
	}
	replica.lag(old)
	time.AfterFunc(200*time.Millisecond, func() { replica.lag(nil) })

	if err := s.Release(ctx, held); !errors.Is(err, placement.ErrNotOwner) {
		t.Fatalf("release on the lease held: %v, want ErrNotOwner (the renewal moved the revision)", err)
	}
	if err := s.ReleaseKey(ctx, key, "py", held.Revision+1); err != nil {
		t.Fatalf("ReleaseKey: %v", err)
	}
	if _, err := replica.KeyValue.Get(ctx, held.Entry); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after ReleaseKey the entry is read %v, want it gone", err)
	}
}
