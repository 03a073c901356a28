package actors

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// instrumented is a tracer provider that records every ended span and a meter provider read
// on demand, and the backend options that wire both.
type instrumented struct {
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	metrics *telemetry.Metrics
	opts    []Option
}

func newInstrumented(t *testing.T) *instrumented {
	t.Helper()
	in := &instrumented{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(in.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(in.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	in.metrics, in.opts = m, []Option{WithTracerProvider(tp), WithMetrics(m)}
	return in
}

// named returns the ended spans called name.
func (in *instrumented) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range in.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one is the single ended span called name, a child of parent.
func (in *instrumented) one(t *testing.T, name string, parent sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := in.named(name)
	if len(spans) != 1 {
		t.Fatalf("%d %q spans, want 1", len(spans), name)
	}
	if got, want := spans[0].Parent().SpanID(), parent.SpanContext().SpanID(); got != want {
		t.Fatalf("%q span's parent is %s, want %q's %s", name, got, parent.Name(), want)
	}
	return spans[0]
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// metric is the data of the instrument called name, nil when nothing was recorded.
func (in *instrumented) metric(t *testing.T, name string) metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := in.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Data
			}
		}
	}
	return nil
}

// A file write on the archive plane is a "file write" span, child of the call's, naming its
// plane, with the freeze its child and the daemon's pause, copy and unpause under the freeze;
// the freeze's time is recorded. An exec is a "container exec" span with the exit code.
func TestFileAndExecSpansAreChildrenOfTheCall(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	in := newInstrumented(t)
	f := newFakeEngine()
	b := newTestBackend(t, f, in.opts...)
	ctx, call := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(in.spans)).Tracer("test").Start(context.Background(), "call")
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "a.txt", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(ctx, sandbox.Shell("true"), "", time.Minute); err != nil {
		t.Fatal(err)
	}
	call.End()
	callSpan := in.named("call")[0]

	write := in.one(t, SpanFilePrefix+"write", callSpan)
	if got := attr(write, KeyFilePlane).AsString(); got != string(FilePlaneArchive) {
		t.Errorf("file write's plane = %q, want archive", got)
	}
	if got := attr(write, "container.name").AsString(); got == "" {
		t.Error("file write names no container")
	}
	in.one(t, SpanFreeze, write)
	exec := in.one(t, SpanExec, callSpan)
	if got := attr(exec, "process.exit.code"); got.Type() != attribute.INT64 || got.AsInt64() != 0 {
		t.Errorf("exec span's exit code = %v", got.String())
	}

	h, ok := in.metric(t, telemetry.NameFreezeDuration).(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 {
		t.Fatalf("freeze histogram = %+v, want one freeze", h)
	}
	b.Close(context.Background())
}

// A new egress network's seal proof is an "egress seal" span, child of the acquire's call,
// with its verdict; a drained window's decisions are counted by scope and decision by the
// metrics as an observer of the backend's acts.
func TestSealSpanAndEgressDecisionCounts(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	in := newInstrumented(t)
	f := newNetFake()
	b := egressBackend(t, f, append(in.opts, WithObserver(sandbox.Observers(&sink{}, in.metrics)))...)
	ctx, call := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(in.spans)).Tracer("test").Start(context.Background(), "call")
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(ctx, testKey, spec); err != nil {
		t.Fatal(err)
	}
	call.End()
	seal := in.one(t, SpanSeal, in.named("call")[0])
	if got := attr(seal, KeySeal).AsString(); got != "sealed" {
		t.Errorf("seal verdict = %q, want sealed", got)
	}

	n := workloadName(b, spec)
	f.decide(n, "ALLOW a.example:443")
	f.decide(n, "DENY b.example:443")
	f.decide(n, "DENY c.example:443")
	if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err != nil {
		t.Fatal(err)
	}
	sum, ok := in.metric(t, telemetry.NameEgressDecision).(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("no egress decisions recorded")
	}
	got := map[string]int64{}
	for _, dp := range sum.DataPoints {
		scope, _ := dp.Attributes.Value(telemetry.KeyScope)
		decision, _ := dp.Attributes.Value(telemetry.KeyDecision)
		got[scope.AsString()+" "+decision.AsString()] = dp.Value
	}
	if len(got) != 2 || got["s ALLOW"] != 1 || got["s DENY"] != 2 {
		t.Fatalf("egress decisions = %v, want s ALLOW 1, s DENY 2", got)
	}
}

// Without the options nothing is recorded and nothing fails: a no-op tracer, nil metrics.
func TestNoInstrumentsByDefault(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	sb, err := b.Acquire(context.Background(), testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(context.Background(), "a.txt", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	b.deliverWindow(context.Background(), sandbox.EgressWindow{Key: testKey, Decisions: []sandbox.EgressDecision{{Decision: sandbox.DecisionDeny}}})
	b.Close(context.Background())
}
