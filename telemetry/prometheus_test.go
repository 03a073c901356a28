package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// TestPrometheusExposesTheInstruments records one of each instrument and reads GET /metrics:
// each appears under the name docs/operations.md gives it, with its labels.
func TestPrometheusExposesTheInstruments(t *testing.T) {
	defer goleak.VerifyNone(t)
	p, err := telemetry.NewPrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := p.Metrics()
	ctx := context.Background()
	m.Call(ctx, "exec", 30*time.Millisecond, "")
	m.Call(ctx, "read_file", time.Millisecond, "not_confined")
	m.SandboxAcquired(ctx, acquired("shell", sandbox.OutcomeCreated))
	m.SandboxAcquired(ctx, refusedAcquire("shell", &sandbox.ImageMissingError{Image: "x"}))
	m.ExecFinished(ctx, exec("shell", 20*time.Millisecond, nil))
	m.ExecFinished(ctx, exec("shell", time.Minute, &sandbox.TimeoutError{Op: "exec"}))
	m.DaemonCall(ctx, "create", 200*time.Millisecond, nil)
	m.DaemonCall(ctx, "inspect", time.Millisecond, errors.New("no such container"))
	m.Froze(ctx, 40*time.Millisecond)
	m.EgressObserved(ctx, window("tenant-a", sandbox.DecisionAllow, sandbox.DecisionAllow, sandbox.DecisionDeny))
	m.PlacementChanged(ctx, lease(sandbox.PlacementClaimed))
	stopLeases, err := m.ObserveLeases(func() int { return 4 })
	if err != nil {
		t.Fatal(err)
	}
	defer stopLeases()
	stop, err := m.ObserveSandboxes(func() map[string]int { return map[string]int{"shell": 2, "python": 1} })
	if err != nil {
		t.Fatal(err)
	}
	stopEvents, err := m.ObserveEvents(func() telemetry.EventCounts { return telemetry.EventCounts{Pending: 3, Delivered: 7, Dropped: 1} })
	if err != nil {
		t.Fatal(err)
	}
	defer stopEvents()
	resp, err := http.Get("http://" + p.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`rpc_server_call_duration_seconds_count{`,
		`rpc_method="exec"`,
		`error_type="not_confined"`,
		`maf_sandbox_acquires_total{`,
		`maf_sandbox_outcome="created"`,
		`error_type="image_missing"`,
		`maf_sandbox_exec_duration_seconds_bucket{`,
		`maf_sandbox_outcome="timeout"`,
		`maf_sandbox_egress_decisions_total{`,
		`maf_sandbox_placement_lease_changes_total{`,
		`maf_sandbox_docker_call_duration_seconds_bucket{`,
		`maf_sandbox_docker_operation="create"`,
		`maf_sandbox_sandboxes{`,
		`maf_sandbox_kind="python"`,
		`maf_sandbox_events_pending{otel_scope_name="github.com/mafsandbox/engine"`,
		`maf_sandbox_events_total{maf_sandbox_result="delivered"`,
		`maf_sandbox_result="dropped"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("GET /metrics lacks %s:\n%s", want, text)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNilMetricsRecordNothing: metrics off is a nil *Metrics, and every method is safe on it.
func TestNilMetricsRecordNothing(t *testing.T) {
	var m *telemetry.Metrics
	ctx := context.Background()
	m.Call(ctx, "exec", time.Second, "")
	m.SandboxAcquired(ctx, acquired("shell", sandbox.OutcomeCreated))
	m.ExecFinished(ctx, exec("shell", time.Second, nil))
	m.DaemonCall(ctx, "create", time.Second, nil)
	m.Froze(ctx, time.Second)
	m.EgressObserved(ctx, window("s", sandbox.DecisionDeny))
	m.PlacementChanged(ctx, lease(sandbox.PlacementLost))
	stop, err := m.ObserveLeases(func() int { t.Fatal("counted with metrics off"); return 0 })
	if err != nil || stop() != nil {
		t.Fatalf("ObserveLeases on nil: %v", err)
	}
	stop, err = m.ObserveSandboxes(func() map[string]int { t.Fatal("counted with metrics off"); return nil })
	if err != nil || stop() != nil {
		t.Fatalf("ObserveSandboxes on nil: %v", err)
	}
	stop, err = m.ObserveEvents(func() telemetry.EventCounts { t.Fatal("counted with metrics off"); return telemetry.EventCounts{} })
	if err != nil || stop() != nil {
		t.Fatalf("ObserveEvents on nil: %v", err)
	}
}

func TestNewMetricsNeedsAProvider(t *testing.T) {
	if _, err := telemetry.NewMetrics(nil); !errors.Is(err, telemetry.ErrOption) {
		t.Fatalf("NewMetrics(nil) = %v, want ErrOption", err)
	}
}

// TestPrometheusRefusesABusyAddress: a listener that cannot bind is an error at once.
func TestPrometheusRefusesABusyAddress(t *testing.T) {
	defer goleak.VerifyNone(t)
	p, err := telemetry.NewPrometheus("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if q, err := telemetry.NewPrometheus(p.Addr(), nil); err == nil {
		_ = q.Close(context.Background())
		t.Fatalf("a second endpoint on %s started", p.Addr())
	}
}

// TestCallerLabelsAreBounded: kinds and scopes are the caller's strings, so each is bounded.
// With kind python listed and a cap of 2, ten kinds and ten scopes a caller made up give three
// and two series of their own plus "other", and every count is kept (under "other").
func TestCallerLabelsAreBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	p, err := telemetry.NewPrometheus("127.0.0.1:0", nil, telemetry.WithKinds("python"), telemetry.WithLabelCap(2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	m := p.Metrics()
	ctx := context.Background()
	held := map[string]int{}
	for i := range 10 {
		kind := fmt.Sprintf("made-up-%d", i)
		m.SandboxAcquired(ctx, refusedAcquire(kind, &sandbox.ImageMissingError{Image: "x"}))
		m.EgressObserved(ctx, window(fmt.Sprintf("scope-%d", i), sandbox.DecisionDeny))
		held[kind] = 1
	}
	m.SandboxAcquired(ctx, acquired("python", sandbox.OutcomeCreated)) // listed: its own series, whatever came first
	held["python"] = 5
	stop, err := m.ObserveSandboxes(func() map[string]int { return held })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	text := scrape(t, p)
	series := func(metric, label string) map[string]float64 {
		out := map[string]float64{}
		for _, line := range strings.Split(text, "\n") {
			if !strings.HasPrefix(line, metric+"{") {
				continue
			}
			_, rest, _ := strings.Cut(line, label+`="`)
			value, _, _ := strings.Cut(rest, `"`)
			var n float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &n); err != nil {
				t.Fatalf("sample %q: %v", line, err)
			}
			out[value] += n
		}
		return out
	}
	for _, tc := range []struct {
		metric, label string
		want          map[string]float64
	}{
		{"maf_sandbox_acquires_total", "maf_sandbox_kind", map[string]float64{"python": 1, "made-up-0": 1, "made-up-1": 1, telemetry.LabelOther: 8}},
		{"maf_sandbox_sandboxes", "maf_sandbox_kind", map[string]float64{"python": 5, "made-up-0": 1, "made-up-1": 1, telemetry.LabelOther: 8}},
		{"maf_sandbox_egress_decisions_total", "maf_sandbox_scope", map[string]float64{"scope-0": 1, "scope-1": 1, telemetry.LabelOther: 8}},
	} {
		if got := series(tc.metric, tc.label); !maps.Equal(got, tc.want) {
			t.Errorf("%s by %s: %v, want %v", tc.metric, tc.label, got, tc.want)
		}
	}
	if _, err := telemetry.NewMetrics(sdkmetric.NewMeterProvider(), telemetry.WithLabelCap(-1)); !errors.Is(err, telemetry.ErrOption) {
		t.Errorf("a negative cap: %v, want ErrOption", err)
	}
}

func scrape(t *testing.T, p *telemetry.Prometheus) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// acquired, refusedAcquire, window, lease and exec build the acts the metrics observe.
func acquired(kind, outcome string) sandbox.SandboxAcquired {
	return sandbox.SandboxAcquired{Act: sandbox.Act{Kind: kind}, Outcome: outcome}
}

func refusedAcquire(kind string, err error) sandbox.SandboxAcquired {
	return sandbox.SandboxAcquired{Act: sandbox.Act{Kind: kind, Err: err}}
}

func window(scope string, decisions ...sandbox.EgressDecisionCode) sandbox.EgressWindow {
	w := sandbox.EgressWindow{Key: sandbox.Key{Scope: scope}}
	for _, d := range decisions {
		w.Decisions = append(w.Decisions, sandbox.EgressDecision{Decision: d})
	}
	return w
}

func lease(change string) sandbox.PlacementChanged { return sandbox.PlacementChanged{Change: change} }

func exec(kind string, took time.Duration, err error) sandbox.ExecFinished {
	return sandbox.ExecFinished{Act: sandbox.Act{Kind: kind, Took: took, Err: err}}
}
