package lifecycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkAcquireBurst measures a burst of cold acquires: 40 at once over 10 fresh keys (so
// 10 containers are created and 30 acquires join or reuse them), each followed by one exec. It
// reports the burst's wall clock and the acquires' median and slowest latency; failures fail
// the benchmark. Run with
//
//	go test -run '^$' -bench AcquireBurst -benchtime 3x ./integration/lifecycle
func BenchmarkAcquireBurst(b *testing.B) {
	const keys, perKey = 10, 4
	be := itest.NewBackend(b)
	spec := itest.BusyboxSpec(b)
	ctx := context.Background()
	var all []time.Duration
	for b.Loop() {
		b.StopTimer()
		ks := make([]sandbox.Key, keys)
		for i := range ks {
			ks[i] = itest.NewKey(b)
		}
		lat := make([]time.Duration, keys*perKey)
		errs := make([]error, keys*perKey)
		var wg sync.WaitGroup
		b.StartTimer()
		for i := range lat {
			wg.Add(1)
			go func() {
				defer wg.Done()
				began := time.Now()
				sb, err := be.Acquire(ctx, ks[i%keys], spec)
				lat[i] = time.Since(began)
				if err == nil {
					_, err = sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		b.StopTimer()
		for _, k := range ks {
			be.Dispose(ctx, k, sandbox.DisposeOptions{})
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		all = append(all, lat...)
		b.StartTimer()
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Milliseconds()), "p50_acquire_ms")
	b.ReportMetric(float64(all[len(all)-1].Milliseconds()), "max_acquire_ms")
}
