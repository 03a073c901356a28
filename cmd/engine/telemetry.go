package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/cmd/engine/internal/version"
	"github.com/mafsandbox/engine/telemetry"
)

// serveMetrics starts the Prometheus endpoint at listen (a bare ":port" binds loopback: an
// operator opens metrics to the network by naming an address), its instruments made with
// opts. With listen empty it returns a nil endpoint, whose nil instruments record nothing.
func serveMetrics(listen string, log *zap.Logger, opts ...telemetry.MetricsOpt) (*telemetry.Prometheus, error) {
	if listen == "" {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("serve: --metrics-listen %q: %w", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	p, err := telemetry.NewPrometheus(net.JoinHostPort(host, port), log.Named("metrics"), opts...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return p, nil
}

// closeMetrics stops the endpoint (nil: none), bounded.
func closeMetrics(p *telemetry.Prometheus, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		log.Warn("stop the metrics endpoint", zap.Error(err))
	}
}

// exportTraces starts the OTLP trace exporter at endpoint; empty is a nil *Tracing, whose
// provider starts no spans.
func exportTraces(ctx context.Context, endpoint string) (*telemetry.Tracing, error) {
	if endpoint == "" {
		return nil, nil
	}
	t, err := telemetry.NewOTLPTracing(ctx, endpoint, version.Build())
	if err != nil {
		return nil, fmt.Errorf("serve: --otlp-endpoint: %w", err)
	}
	return t, nil
}

// closeTraces flushes the spans still batched (nil: none), bounded.
func closeTraces(t *telemetry.Tracing, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Close(ctx); err != nil {
		log.Warn("flush the traces", zap.Error(err))
	}
}

// telemetry starts the metrics endpoint and the trace exporter the flags ask for and returns
// the instruments and tracer provider (no-ops for what is off) and one closer for both.
func (v *serveVerb) telemetry(ctx context.Context, log *zap.Logger) (*telemetry.Metrics, trace.TracerProvider, func(), error) {
	prom, err := serveMetrics(v.metricsListen, log, v.limits.metricsOptions()...)
	if err != nil {
		return nil, nil, nil, err
	}
	tracing, err := exportTraces(ctx, v.otlpEndpoint)
	if err != nil {
		closeMetrics(prom, log)
		return nil, nil, nil, err
	}
	return prom.Metrics(), tracing.TracerProvider(), func() {
		closeTraces(tracing, log)
		closeMetrics(prom, log)
	}, nil
}
