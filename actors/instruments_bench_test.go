package actors

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/telemetry"
)

// BenchmarkInstrumentsOff is what the backend's telemetry costs a call with metrics and traces
// off (the default): a file call's or exec's span started and ended on the no-op tracer, and
// a freeze's time handed to nil instruments. docs/benchmarks.md sets it beside a call's time.
func BenchmarkInstrumentsOff(b *testing.B) {
	be := &Backend{tracer: telemetry.Tracer(nil)}
	a := &containerActor{b: be, name: "maf-sandbox-docker-0123456789ab"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sctx, end := a.span(ctx, SpanExec)
		end(nil)
		be.froze(sctx, time.Now())
	}
}
