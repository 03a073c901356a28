package placement_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// The tests here run against a real 3-node cluster of containers, with the bucket at 3
// replicas, each engine's store on its own node.

// TestClusterClaimRaceThroughANodeKill: 50 workers claim 20 keys through 3 engines on 3
// different nodes, one node is killed mid-race, and every key still ends with exactly one owner
// that every worker of the key was told.
func TestClusterClaimRaceThroughANodeKill(t *testing.T) {
	noLeaks(t)
	c := natscluster.Run(t, 3)
	var stores []*placement.Store
	for i := range 3 {
		// Nothing renews here, so the lease must outlast the whole race: under load the
		// election after the kill took longer than the default lease and its grace, and an
		// unrenewed lease that lapses is rightly taken over — not what this test is about.
		stores = append(stores, store(t, c.URLs(), fmt.Sprintf("e%d", i+1), placement.WithReplicas(3), placement.WithLease(5*time.Minute)))
	}
	const workers, keys, rounds = 50, 20, 4
	var mu sync.Mutex
	owners := map[string]string{}
	var wg sync.WaitGroup
	for round := range rounds {
		if round == 2 {
			c.Kill(1) // mid-traffic: the clients fail over to the other nodes
		}
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := stores[(w+round)%len(stores)]
				key := fmt.Sprint(w % keys)
				k := sandbox.Key{Scope: "race", ThreadID: key, AgentID: "a"}
				var owner string
				for attempt := 0; ; attempt++ {
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
					l, _, err := s.Claim(ctx, k, "python")
					cancel()
					var held *placement.HeldError
					if err == nil {
						owner = l.Engine
						break
					}
					if errors.As(err, &held) {
						owner = held.Owner
						break
					}
					if attempt == 20 {
						t.Errorf("claim %s: %v", key, err)
						return
					}
					time.Sleep(200 * time.Millisecond) // the election after the kill
				}
				mu.Lock()
				defer mu.Unlock()
				if o, ok := owners[key]; ok && o != owner {
					t.Errorf("key %s: told owner %s and %s", key, o, owner)
				}
				owners[key] = owner
			}()
		}
		wg.Wait()
	}
	if len(owners) != keys {
		t.Fatalf("%d keys have owners, want %d", len(owners), keys)
	}
}

// TestClusterPartitionedOwnerIsFenced: an owner cut off from the cluster cannot renew, sees
// its lease lapse, and another engine takes the sandbox over; after the heal the old owner's
// renewal is refused (the revision moved) and its lookup shows the new owner.
func TestClusterPartitionedOwnerIsFenced(t *testing.T) {
	noLeaks(t)
	c := natscluster.Run(t, 3)
	opts := []placement.Option{placement.WithReplicas(3), placement.WithLease(time.Second), placement.WithGrace(200 * time.Millisecond)}
	r := natscluster.NewRelay(t, strings.TrimPrefix(c.URL(0), "nats://"))
	// a talks to node 1 only, through the relay: when the relay is cut, a is partitioned.
	_, jsA := jsOn(t, r.URL(), nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.Timeout(time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	a, err := placement.New(ctx, jsA, "a", opts...)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b := store(t, c.URL(1), "b", opts...)

	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}
	la, _, err := a.Claim(t.Context(), k, "py")
	if err != nil {
		t.Fatal(err)
	}
	r.Cut()
	short, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	if _, err := a.Renew(short, la); err == nil {
		t.Fatalf("a renewed while partitioned")
	}
	cancel()

	var lb placement.Lease
	var taken *placement.Record
	eventually(t, "b takes the partitioned owner's lease over", func() bool {
		lb, taken, err = b.Claim(t.Context(), k, "py")
		return err == nil
	})
	if taken == nil || taken.Engine != "a" {
		t.Fatalf("b's claim took over %+v, want a's record", taken)
	}
	// Fencing by time: by the time anyone could take over, a's own lease had lapsed.
	if la.Valid(time.Now()) {
		t.Fatalf("a's lease is still valid after b took over")
	}

	r.Heal()
	eventually(t, "a, healed, is told its lease is lost", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := a.Renew(ctx, la)
		return errors.As(err, new(*placement.LostError))
	})
	eventually(t, "a's lookup shows b", func() bool {
		rec, ok := a.Lookup(k, "py")
		return ok && rec.Engine == "b" && rec.Revision >= lb.Revision
	})
	if _, _, err := a.Claim(t.Context(), k, "py"); !errors.Is(err, placement.ErrNotOwner) {
		t.Fatalf("a claims b's live lease after the heal: %v, want a HeldError", err)
	}
}
