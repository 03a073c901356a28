package docker

import (
	"context"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mafsandbox/engine/telemetry"
)

// instruments are a driver's metrics and tracer (both no-ops unless [WithMetrics] and
// [WithTracerProvider] gave them).
type instruments struct {
	metrics *telemetry.Metrics
	tracer  trace.Tracer
}

func newInstruments(o options) instruments {
	return instruments{metrics: o.metrics, tracer: telemetry.Tracer(o.tracer)}
}

// begin starts one daemon call named op (as the docker command names it): a client span, child of
// ctx's. The returned end closes the span with err and records the call's duration.
func (in instruments) begin(ctx context.Context, op string) (context.Context, func(err error) time.Duration) {
	start := time.Now()
	ctx, span := in.tracer.Start(ctx, "docker "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(telemetry.KeyDaemonOp.String(op)))
	return ctx, func(err error) time.Duration {
		elapsed := time.Since(start)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(otelcodes.Error, "daemon call failed")
		}
		span.End()
		in.metrics.DaemonCall(ctx, op, elapsed, err)
		return elapsed
	}
}
