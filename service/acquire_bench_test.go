package service_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// BenchmarkAcquireRoundTrip is an acquire through the client over an embedded server on the
// fake backend, warm (the key's sandbox exists) and cold (a new key each time), without and
// with placement (docs/benchmarks.md). It reports the median as median-ns/op.
func BenchmarkAcquireRoundTrip(b *testing.B) {
	for _, placed := range []bool{false, true} {
		name := "plain"
		if placed {
			name = "placement"
		}
		b.Run(name, func(b *testing.B) {
			fake := newFake(b)
			srv := natstest.Run(b)
			router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
			if err != nil {
				b.Fatalf("router: %v", err)
			}
			var opts []service.Option
			if placed {
				js, err := jetstream.New(natstest.Connect(b, srv))
				if err != nil {
					b.Fatal(err)
				}
				p, err := placement.New(context.Background(), js, "bench")
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(p.Close)
				opts = append(opts, service.WithPlacement(p))
			}
			svc, err := service.New(natstest.Connect(b, srv), router, opts...)
			if err != nil {
				b.Fatalf("service: %v", err)
			}
			b.Cleanup(func() { _ = svc.Stop(context.Background()) })
			remote, err := client.New(context.Background(), natstest.Connect(b, srv))
			if err != nil {
				b.Fatalf("client: %v", err)
			}
			ctx := context.Background()
			spec := testSpec(b)
			if _, err := remote.Acquire(ctx, testKey, spec); err != nil {
				b.Fatalf("acquire: %v", err)
			}
			b.Run("warm", func(b *testing.B) {
				medianOf(b, func(int) sandbox.Key { return testKey }, remote, spec)
			})
			run := 0
			b.Run("cold", func(b *testing.B) {
				run++
				medianOf(b, func(i int) sandbox.Key {
					return sandbox.Key{Scope: "bench", ThreadID: fmt.Sprint(run), AgentID: fmt.Sprint(i)}
				}, remote, spec)
			})
		})
	}
}

func medianOf(b *testing.B, key func(i int) sandbox.Key, c *client.Backend, spec sandbox.Spec) {
	b.Helper()
	ctx := context.Background()
	var d []time.Duration
	i := 0
	for b.Loop() {
		k := key(i)
		i++
		start := time.Now()
		if _, err := c.Acquire(ctx, k, spec); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
}
