package egress

import (
	"context"
	"testing"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkAllowlist measures an allowlisted sandbox on this daemon's own topology: a cold
// acquire (internal network on a pool subnet, proxy created, started, its seal proved, its
// outbound leg connected, the §1.7 checks, the workload) and a dispose that drains the proxy, removes it, the
// workload and the network, and hands the window to a sink — timed to its reply, which comes
// before the network's removal (docs/operations.md). Run with
//
//	go test -run '^$' -bench Allowlist -count 5 ./integration
func BenchmarkAllowlist(b *testing.B) {
	fx := newEgressFixture(b)
	sink := &recordingSink{}
	be := egressBackend(b, fx.network, actors.WithObserver(sink))
	spec := allowlistSpec(b, images.ClientTag, allowedHost)
	ctx := context.Background()
	b.Run("acquire_cold", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			key := itest.NewKey(b)
			b.StartTimer()
			if _, err := be.Acquire(ctx, key, spec); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			be.Dispose(ctx, key, sandbox.DisposeOptions{})
			// The network goes after the reply: let it go before the next timed acquire.
			if err := be.AwaitTeardowns(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("dispose_with_drain", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			key := itest.NewKey(b)
			sb, err := be.Acquire(ctx, key, spec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", 60e9); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if f := be.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				b.Fatal(f)
			}
		}
	})
	if len(sink.got()) == 0 {
		b.Fatal("no egress window reached the sink")
	}
}
