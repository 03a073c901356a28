package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// TestOTLPTraceOfAnAcquire runs engine serve with --otlp-endpoint pointed at a real Jaeger
// (built from the Go module proxy: make jaeger), acquires a sandbox under a span of the
// test's own, and reads the trace back from Jaeger's query API: the engine's acquire span is
// a child of the caller's span (the traceparent crossed NATS), and the Docker daemon's create
// and start calls are children of the acquire's span.
func TestOTLPTraceOfAnAcquire(t *testing.T) {
	dockertest.Require(t)
	jaeger := jaegerBinary(t)
	otlpAddr, queryAddr := freeAddr(t), freeAddr(t)
	startJaeger(t, jaeger, otlpAddr, queryAddr)
	natsURL := itest.StartServe(t, nil, "--otlp-endpoint", "http://"+otlpAddr)

	ctx := itest.Context(t)
	c := remoteClient(t, natsURL)
	// The caller's own span: the engine's must join its trace.
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	sctx, caller := tp.Tracer("test").Start(ctx, "agent step")
	b := itest.NewBackend(t) // only to dispose whatever the test leaves
	key := itest.NewKey(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	if _, err := c.Acquire(sctx, key, itest.BusyboxSpec(t)); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	caller.End()
	traceID := caller.SpanContext().TraceID().String()
	callerSpan := caller.SpanContext().SpanID().String()

	// engine serve's batcher sends within seconds; Jaeger answers once it has stored them.
	var tr jaegerTrace
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		tr, err = getTrace(queryAddr, traceID)
		if err == nil && tr.has("docker start") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace %s with the acquire's daemon calls in Jaeger within a minute: %v; got %+v", traceID, err, tr)
		}
		time.Sleep(500 * time.Millisecond)
	}
	acq := tr.named("acquire")
	if len(acq) != 1 {
		t.Fatalf("trace %s has %d acquire spans, want 1: %+v", traceID, len(acq), tr)
	}
	if acq[0].parent() != callerSpan {
		t.Errorf("the acquire span's parent is %q, want the caller's span %s", acq[0].parent(), callerSpan)
	}
	if svc := tr.Processes[acq[0].ProcessID].ServiceName; svc != telemetry.ServiceName {
		t.Errorf("the acquire span's service is %q, want %q", svc, telemetry.ServiceName)
	}
	for _, op := range []string{"docker create", "docker start"} {
		spans := tr.named(op)
		if len(spans) == 0 {
			t.Errorf("trace %s has no %q span", traceID, op)
			continue
		}
		for _, s := range spans {
			if s.parent() != acq[0].SpanID {
				t.Errorf("%q span's parent is %q, want the acquire's span %s", op, s.parent(), acq[0].SpanID)
			}
		}
	}
	t.Logf("trace %s: %d spans", traceID, len(tr.Spans))
}

// jaegerBinary is Jaeger's all-in-one binary, which make jaeger builds from the module proxy
// into GOBIN (or GOPATH/bin), found there or on PATH.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir := strings.TrimSpace(lines[0])
		if dir == "" && len(lines) > 1 {
			dir = filepath.Join(strings.Split(strings.TrimSpace(lines[1]), ":")[0], "bin")
		}
		if p := filepath.Join(dir, "jaeger"); dir != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Fatalf("no jaeger on PATH or in GOBIN: run make jaeger (it builds Jaeger from the Go module proxy); make test and .ci/run do")
	return ""
}

// startJaeger runs Jaeger with an in-memory store, its OTLP/HTTP receiver on otlpAddr and its
// query API on queryAddr, nothing else listening, until the test ends.
func startJaeger(t *testing.T, bin, otlpAddr, queryAddr string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	conf := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %q
    grpc:
      endpoint: %q
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryAddr, freeAddr(t), otlpAddr)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	startServer(t, "jaeger", bin, "http://"+queryAddr+"/api/services", "--config", cfg)
}

// jaegerTrace is one trace as Jaeger's query API returns it.
type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// tag is the span's tag key as text ("" when it has none).
func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (tr jaegerTrace) named(op string) []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.Spans {
		if s.OperationName == op {
			out = append(out, s)
		}
	}
	return out
}

func (tr jaegerTrace) has(op string) bool { return len(tr.named(op)) > 0 }

func getTrace(queryAddr, id string) (jaegerTrace, error) {
	resp, err := http.Get("http://" + queryAddr + "/api/traces/" + url.PathEscape(id))
	if err != nil {
		return jaegerTrace{}, err
	}
	defer resp.Body.Close()
	var r struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return jaegerTrace{}, fmt.Errorf("trace %s: %s: %w", id, resp.Status, err)
	}
	if len(r.Data) != 1 {
		return jaegerTrace{}, fmt.Errorf("trace %s: %s, %d traces", id, resp.Status, len(r.Data))
	}
	return r.Data[0], nil
}
