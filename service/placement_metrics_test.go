package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
	"github.com/mafsandbox/engine/telemetry"
)

// leaseMetrics reads the placement instruments: the leases held now (-1 before the gauge
// reported) and the lease changes counted, by change.
func leaseMetrics(t *testing.T, r *sdkmetric.ManualReader) (held int64, changes map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	held, changes = -1, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				if m.Name == telemetry.NameLeases && len(d.DataPoints) == 1 {
					held = d.DataPoints[0].Value
				}
			case metricdata.Sum[int64]:
				if m.Name != telemetry.NameLeaseChanges {
					continue
				}
				for _, dp := range d.DataPoints {
					v, _ := dp.Attributes.Value(telemetry.KeyChange)
					changes[v.AsString()] = dp.Value
				}
			}
		}
	}
	return held, changes
}

// TestPlacementLeaseMetrics: a cold acquire's claim is counted and the lease shows as held;
// once another engine's record replaces it, the renewal counts it lost and none is held.
func TestPlacementLeaseMetrics(t *testing.T) {
	srv := natstest.Run(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	p := placementStore(t, srv, "e1", placement.WithLease(300*time.Millisecond))
	e := startObservedEngineOn(t, srv, newFake(t), m, service.WithPlacement(p), service.WithMetrics(m))
	c := newClient(t, e, client.WithRetryWait(0))
	ctx := ctxT(t)
	if _, err := c.Acquire(ctx, testKey, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	waitLeases(t, reader, 1, map[string]int64{sandbox.PlacementClaimed: 1})

	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"engine":"thief","expires":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
	if _, err := kv.Put(ctx, placement.EntryKey(testKey, "shell"), []byte(rec)); err != nil {
		t.Fatal(err)
	}
	waitLeases(t, reader, 0, map[string]int64{sandbox.PlacementClaimed: 1, sandbox.PlacementLost: 1})
}

// waitLeases waits until the instruments read held leases and exactly the changes want.
func waitLeases(t *testing.T, r *sdkmetric.ManualReader, held int64, want map[string]int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, got := leaseMetrics(t, r)
		same := h == held && len(got) == len(want)
		for k, v := range want {
			same = same && got[k] == v
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases held %d, changes %v; want %d, %v", h, got, held, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
