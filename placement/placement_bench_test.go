package placement_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// timed runs op in b.Loop and reports the median of its durations as median-ns/op, the
// figure docs/benchmarks.md records (the mean hides a skewed tail).
func timed(b *testing.B, op func(i int)) {
	b.Helper()
	var d []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		op(i)
		d = append(d, time.Since(start))
		i++
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
}

// BenchmarkPlacement measures the placement operations on an embedded server on loopback,
// beside a plain NATS request/reply to an echo responder (the hop every engine call pays).
func BenchmarkPlacement(b *testing.B) {
	srv := natstest.Run(b)
	url := srv.ClientURL()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	sub, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	_, js := jsOn(b, url)
	s, err := placement.New(context.Background(), js, "e1")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ctx := context.Background()
	key := func(i int, run string) sandbox.Key {
		return sandbox.Key{Scope: "bench", ThreadID: run, AgentID: fmt.Sprint(i)}
	}

	b.Run("request-echo", func(b *testing.B) {
		timed(b, func(int) {
			if _, err := nc.Request("bench.echo", []byte(`{"type":"x"}`), 5*time.Second); err != nil {
				b.Fatal(err)
			}
		})
	})
	run := 0
	b.Run("claim-new", func(b *testing.B) {
		run++
		r := fmt.Sprint("new", run)
		timed(b, func(i int) {
			if _, _, err := s.Claim(ctx, key(i, r), "py"); err != nil {
				b.Fatal(err)
			}
		})
	})
	owned, _, err := s.Claim(ctx, key(0, "own"), "py")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("claim-own", func(b *testing.B) {
		timed(b, func(int) {
			if owned, _, err = s.Claim(ctx, key(0, "own"), "py"); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("renew", func(b *testing.B) {
		l := owned
		timed(b, func(int) {
			if l, err = s.Renew(ctx, l); err != nil {
				b.Fatal(err)
			}
		})
		owned = l
	})
	b.Run("lookup-cached", func(b *testing.B) {
		timed(b, func(int) {
			if _, ok := s.Lookup(key(0, "own"), "py"); !ok {
				b.Fatal("not found")
			}
		})
	})
	b.Run("get-bucket", func(b *testing.B) {
		timed(b, func(int) {
			if _, ok, err := s.Get(ctx, key(0, "own"), "py"); err != nil || !ok {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkPlacementCluster is claim and renew on the 3-node container cluster with the bucket
// at 3 replicas: what a claim costs once JetStream must reach a quorum.
func BenchmarkPlacementCluster(b *testing.B) {
	c := natscluster.Run(b, 3)
	_, js := jsOn(b, c.URL(0))
	s, err := placement.New(context.Background(), js, "e1", placement.WithReplicas(3))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	ctx := context.Background()
	nc := c.Connect(b)
	sub, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	b.Run("request-echo", func(b *testing.B) {
		timed(b, func(int) {
			if _, err := nc.Request("bench.echo", []byte(`{"type":"x"}`), 5*time.Second); err != nil {
				b.Fatal(err)
			}
		})
	})
	run := 0
	var l placement.Lease
	b.Run("claim-new", func(b *testing.B) {
		run++
		timed(b, func(i int) {
			if l, _, err = s.Claim(ctx, sandbox.Key{Scope: "bench", ThreadID: fmt.Sprint(run), AgentID: fmt.Sprint(i)}, "py"); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("renew", func(b *testing.B) {
		timed(b, func(int) {
			if l, err = s.Renew(ctx, l); err != nil {
				b.Fatal(err)
			}
		})
	})
}
