package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The warm pool's instruments (actors' pool.go).
const (
	// NamePoolTakes counts acquires a pool could serve, by image and result (hit: a member
	// was handed out; miss: none was ready, the cold path ran).
	NamePoolTakes = "maf_sandbox.pool.takes"
	// NamePoolSpares is the members waiting now, by image.
	NamePoolSpares = "maf_sandbox.pool.spares"
	// NamePoolRefill is how long making one member took: create, prepare, start.
	NamePoolRefill = "maf_sandbox.pool.refill.duration"
)

// KeyImage is the image a pool serves.
const KeyImage = attribute.Key("maf_sandbox.image")

// Results of [Metrics.PoolTake].
const (
	PoolHit  = "hit"
	PoolMiss = "miss"
)

// poolInstruments are made on first use: a backend without a pool registers none.
type poolInstruments struct {
	takes  metric.Int64Counter
	refill metric.Float64Histogram
}

func (m *Metrics) poolInstruments() (*poolInstruments, error) {
	m.poolOnce.Do(func() {
		p := &poolInstruments{}
		var err error
		if p.takes, err = m.meter.Int64Counter(NamePoolTakes, metric.WithUnit("{acquire}"),
			metric.WithDescription("Acquires a warm pool could serve, by image and result (hit, miss).")); err != nil {
			m.poolErr = fmt.Errorf("telemetry: %s: %w", NamePoolTakes, err)
			return
		}
		if p.refill, err = m.meter.Float64Histogram(NamePoolRefill, metric.WithUnit("s"),
			metric.WithDescription("Time to make one warm pool member: create, prepare and start."),
			metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
			m.poolErr = fmt.Errorf("telemetry: %s: %w", NamePoolRefill, err)
			return
		}
		m.pool = p
	})
	return m.pool, m.poolErr
}

// PoolTake counts one acquire a pool of image could serve: [PoolHit] or [PoolMiss].
func (m *Metrics) PoolTake(ctx context.Context, image, result string) {
	if m == nil {
		return
	}
	if p, err := m.poolInstruments(); err == nil {
		p.takes.Add(ctx, 1, metric.WithAttributes(KeyImage.String(image), KeyResult.String(result)))
	}
}

// PoolRefilled records the making of one member of image's pool.
func (m *Metrics) PoolRefilled(ctx context.Context, image string, d time.Duration) {
	if m == nil {
		return
	}
	if p, err := m.poolInstruments(); err == nil {
		p.refill.Record(ctx, d.Seconds(), metric.WithAttributes(KeyImage.String(image)))
	}
}

// ObservePoolSpares reports the members waiting in each pool, by image, as count returns
// them, at each collection. The returned function stops the reporting.
func (m *Metrics) ObservePoolSpares(count func() map[string]int) (stop func() error, err error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	g, err := m.meter.Int64ObservableGauge(NamePoolSpares, metric.WithUnit("{sandbox}"),
		metric.WithDescription("Warm pool members waiting for a key, by image."))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", NamePoolSpares, err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for image, n := range count() {
			o.ObserveInt64(g, int64(n), metric.WithAttributes(KeyImage.String(image)))
		}
		return nil
	}, g)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s callback: %w", NamePoolSpares, err)
	}
	return reg.Unregister, nil
}
