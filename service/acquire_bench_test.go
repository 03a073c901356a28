package service_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// BenchmarkAcquireRoundTrip is a warm acquire through the client over an embedded server on
// the fake backend: the plain acquire round trip a placement claim is compared with
// (docs/benchmarks.md). It reports the median as median-ns/op.
func BenchmarkAcquireRoundTrip(b *testing.B) {
	fake := newFake(b)
	srv := natstest.Run(b)
	router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		b.Fatalf("router: %v", err)
	}
	svc, err := service.New(natstest.Connect(b, srv), router)
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
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := remote.Acquire(ctx, testKey, spec); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "median-ns/op")
}
