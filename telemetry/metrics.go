package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument names, as OpenTelemetry names them (a Prometheus scrape sees them with dots as
// underscores and the unit appended: rpc_server_call_duration_seconds).
const (
	NameCallDuration   = "rpc.server.call.duration"
	NameAcquires       = "maf_sandbox.acquires"
	NameExecDuration   = "maf_sandbox.exec.duration"
	NameSandboxes      = "maf_sandbox.sandboxes"
	NameDaemonDuration = "maf_sandbox.docker.call.duration"
	NameEventsPending  = "maf_sandbox.events.pending"
	NameEventsCount    = "maf_sandbox.events"
	NameEventsBlocked  = "maf_sandbox.events.blocked"
	NameStreamRefusals = "maf_sandbox.events.stream_refusals"
	NameFreezeDuration = "maf_sandbox.freeze.duration"
	NameEgressDecision = "maf_sandbox.egress.decisions"
	NameLeases         = "maf_sandbox.placement.leases"
	NameLeaseChanges   = "maf_sandbox.placement.lease.changes"
)

// Attribute keys the instruments carry.
const (
	KeyRPCSystem = attribute.Key("rpc.system")
	KeyRPCMethod = attribute.Key("rpc.method")
	KeyErrorType = attribute.Key("error.type")
	KeyKind      = attribute.Key("maf_sandbox.kind")
	KeyOutcome   = attribute.Key("maf_sandbox.outcome")
	KeyDaemonOp  = attribute.Key("maf_sandbox.docker.operation")
	KeyResult    = attribute.Key("maf_sandbox.result")
	KeyScope     = attribute.Key("maf_sandbox.scope")
	KeyDecision  = attribute.Key("maf_sandbox.egress.decision")
	KeyChange    = attribute.Key("maf_sandbox.placement.change")
)

// durationBuckets are the histogram bounds in seconds: an exec or a cached acquire answers
// in milliseconds, a cold allowlisted acquire in about a second, a long exec in minutes.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is the engine's instruments. Its methods are safe for concurrent use, and on a nil
// *Metrics they do nothing: that is how metrics are off.
type Metrics struct {
	calls    metric.Float64Histogram
	acquires metric.Int64Counter
	execs    metric.Float64Histogram
	daemon   metric.Float64Histogram
	freezes  metric.Float64Histogram
	egress   metric.Int64Counter
	leases   metric.Int64Counter
	meter    metric.Meter
	// kinds and scopes bound the caller-chosen labels (labels.go).
	kinds, scopes *boundedLabel

	poolOnce sync.Once // pool.go: made on first use
	pool     *poolInstruments
	poolErr  error
}

// NewMetrics makes the instruments from mp's meter for this module. [ErrOption] for a nil mp
// or a bad option.
func NewMetrics(mp metric.MeterProvider, opts ...MetricsOpt) (*Metrics, error) {
	if mp == nil {
		return nil, errNoProvider
	}
	o := defaultMetricsOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	m := &Metrics{meter: mp.Meter("github.com/mafsandbox/engine"),
		kinds: newBoundedLabel(o.kinds, o.labelCap), scopes: newBoundedLabel(nil, o.labelCap)}
	var err error
	if m.calls, err = m.meter.Float64Histogram(NameCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of the engine's NATS API calls, from the request's arrival to the reply."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameCallDuration, err)
	}
	if m.acquires, err = m.meter.Int64Counter(NameAcquires, metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires, by sandbox kind and outcome (created, reused, restarted, adopted, reset, replaced, or refused with its code).")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameAcquires, err)
	}
	if m.execs, err = m.meter.Float64Histogram(NameExecDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each command run in a sandbox (exec, run_code, a host-tools program), by sandbox kind and outcome (ok, timeout, output_limit, refused with its code)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameExecDuration, err)
	}
	if m.daemon, err = m.meter.Float64Histogram(NameDaemonDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of each call to the Docker daemon, by operation."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameDaemonDuration, err)
	}
	if err := m.newEngineInstruments(); err != nil {
		return nil, err
	}
	return m, nil
}

// newEngineInstruments makes the instruments the backend and the placement record into.
func (m *Metrics) newEngineInstruments() error {
	var err error
	if m.freezes, err = m.meter.Float64Histogram(NameFreezeDuration, metric.WithUnit("s"),
		metric.WithDescription("How long a file call on the archive plane held its container frozen, from the pause to the end of the thaw."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return fmt.Errorf("telemetry: %s: %w", NameFreezeDuration, err)
	}
	if m.egress, err = m.meter.Int64Counter(NameEgressDecision, metric.WithUnit("{decision}"),
		metric.WithDescription("Egress decisions of the proxies drained and removed, by the sandbox's scope and the decision (ALLOW, DENY, DENY-NONGLOBAL, UNREACHABLE).")); err != nil {
		return fmt.Errorf("telemetry: %s: %w", NameEgressDecision, err)
	}
	if m.leases, err = m.meter.Int64Counter(NameLeaseChanges, metric.WithUnit("{lease}"),
		metric.WithDescription("Placement leases this engine claimed, took over from a lapsed owner, or lost to another engine.")); err != nil {
		return fmt.Errorf("telemetry: %s: %w", NameLeaseChanges, err)
	}
	return nil
}

// Call records one API call: its operation, how long it took and, when it was refused or
// failed, its wire code (empty on success).
func (m *Metrics) Call(ctx context.Context, op string, d time.Duration, code string) {
	if m == nil {
		return
	}
	attrs := []attribute.KeyValue{KeyRPCSystem.String("nats"), KeyRPCMethod.String(op)}
	if code != "" {
		attrs = append(attrs, KeyErrorType.String(code))
	}
	m.calls.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// DaemonCall records one call to the Docker daemon: the operation as the docker command names it
// (create, start, exec, ...), its duration, and whether it failed.
func (m *Metrics) DaemonCall(ctx context.Context, op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	attrs := []attribute.KeyValue{KeyDaemonOp.String(op)}
	if err != nil {
		attrs = append(attrs, KeyErrorType.String("error"))
	}
	m.daemon.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}

// ObserveSandboxes reports the live sandboxes by kind (bounded as [Metrics.Acquired]'s), as
// count returns them, at each collection. The returned function stops the reporting.
func (m *Metrics) ObserveSandboxes(count func() map[string]int) (stop func() error, err error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	g, err := m.meter.Int64ObservableGauge(NameSandboxes, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Sandboxes this engine holds now, by kind."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameSandboxes, err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for kind, n := range m.kinds.fold(count()) {
			o.ObserveInt64(g, int64(n), metric.WithAttributes(KeyKind.String(kind)))
		}
		return nil
	}, g)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s callback: %w", NameSandboxes, err)
	}
	return reg.Unregister, nil
}

// EventCounts is what the engine's event outbox has done: the events it holds now (Blocked of
// them behind one a stream refuses to store), and since it started those delivered, those
// dropped because it was full, those the server refused for good, and the publishes a stream
// refused to store.
type EventCounts struct {
	Pending, Blocked                           int
	Delivered, Dropped, Failed, StreamRefusals int64
}

// ObserveEvents reports the outbox's counts, as count returns them, at each collection:
// maf_sandbox.events.pending, maf_sandbox.events.blocked, maf_sandbox.events by result
// (delivered, dropped, failed) and maf_sandbox.events.stream_refusals. The returned function
// stops the reporting.
func (m *Metrics) ObserveEvents(count func() EventCounts) (stop func() error, err error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	pending, err := m.meter.Int64ObservableGauge(NameEventsPending, metric.WithUnit("{event}"),
		metric.WithDescription("Events the outbox holds now, not yet accepted by JetStream."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameEventsPending, err)
	}
	blocked, err := m.meter.Int64ObservableGauge(NameEventsBlocked, metric.WithUnit("{event}"),
		metric.WithDescription("Events held now behind one a stream refuses to store (its limits reached with discard new): they wait for an operator."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameEventsBlocked, err)
	}
	total, err := m.meter.Int64ObservableCounter(NameEventsCount, metric.WithUnit("{event}"),
		metric.WithDescription("Events by result: delivered, dropped (the outbox was full), failed (refused for good by the server)."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameEventsCount, err)
	}
	refusals, err := m.meter.Int64ObservableCounter(NameStreamRefusals, metric.WithUnit("{attempt}"),
		metric.WithDescription("Publish attempts a stream refused to store; each refused event is held and retried."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameStreamRefusals, err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := count()
		o.ObserveInt64(pending, int64(c.Pending))
		o.ObserveInt64(blocked, int64(c.Blocked))
		o.ObserveInt64(total, c.Delivered, metric.WithAttributes(KeyResult.String("delivered")))
		o.ObserveInt64(total, c.Dropped, metric.WithAttributes(KeyResult.String("dropped")))
		o.ObserveInt64(total, c.Failed, metric.WithAttributes(KeyResult.String("failed")))
		o.ObserveInt64(refusals, c.StreamRefusals)
		return nil
	}, pending, blocked, total, refusals)
	if err != nil {
		return nil, fmt.Errorf("telemetry: events callback: %w", err)
	}
	return reg.Unregister, nil
}

// Froze records how long one freeze held a container frozen.
func (m *Metrics) Froze(ctx context.Context, d time.Duration) {
	if m == nil {
		return
	}
	m.freezes.Record(ctx, d.Seconds())
}

// ObserveLeases reports the placement leases this engine holds, as count returns them, at
// each collection. The returned function stops the reporting.
func (m *Metrics) ObserveLeases(count func() int) (stop func() error, err error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	g, err := m.meter.Int64ObservableGauge(NameLeases, metric.WithUnit("{lease}"),
		metric.WithDescription("Placement leases this engine holds now: the sandboxes the cluster records as its own."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NameLeases, err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, int64(count()))
		return nil
	}, g)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s callback: %w", NameLeases, err)
	}
	return reg.Unregister, nil
}
