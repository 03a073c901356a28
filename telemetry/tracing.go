package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of every span the engine starts.
const TracerName = "github.com/mafsandbox/engine"

// ServiceName is the service.name resource attribute of the engine's spans.
const ServiceName = "maf-sandbox-engine"

// Tracing exports the engine's spans over OTLP/HTTP, batched: a span per API call (continuing
// the caller's traceparent) with a child per Docker daemon call.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// NewOTLPTracing exports to endpoint, an OTLP/HTTP base URL (http://collector:4318); the
// exporter appends /v1/traces. version is the service.version the spans carry.
func NewOTLPTracing(ctx context.Context, endpoint, version string) (*Tracing, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: OTLP endpoint %q is not an http(s) URL with a host", ErrOption, endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host),
		otlptracehttp.WithURLPath(strings.TrimSuffix(u.Path, "/") + "/v1/traces")}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(ServiceName), semconv.ServiceVersion(version))
	return &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// TracerProvider is what the service and the drivers start their spans from; a no-op one on
// a nil *Tracing (traces off).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.provider
}

// Close flushes the spans still batched and stops the exporter. On nil it does nothing.
func (t *Tracing) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Tracer is the engine's tracer from tp, a no-op one when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// TraceContext is the W3C trace-context propagator the engine reads a request's traceparent
// with and the Go client writes it with.
func TraceContext() propagation.TextMapPropagator { return propagation.TraceContext{} }
