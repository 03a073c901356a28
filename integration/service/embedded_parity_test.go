package service

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap/zaptest"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// conversation is the acts both workers run, in order: acquire, write, exec, read, dispose.
var conversation = []string{events.AuditSandboxAcquired, events.AuditFileWritten, events.AuditExecFinished,
	events.AuditFileRead, events.AuditSandboxDisposed}

// runConversation runs the conversation on key through acquire and dispose, the sandbox's own
// calls in between.
func runConversation(t *testing.T, key sandbox.Key, spec sandbox.Spec,
	acquire func(context.Context, sandbox.Key, sandbox.Spec) (sandbox.Sandbox, error),
	dispose func(context.Context, sandbox.Key, sandbox.DisposeOptions) *sandbox.DisposalFailure) {
	t.Helper()
	ctx := itest.Context(t)
	sb, err := acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if err := sb.WriteFile(ctx, "a.txt", []byte("hello"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	if res, err := sb.Exec(ctx, sandbox.Argv("cat", "a.txt"), ".", time.Minute); err != nil || string(res.StdoutBytes) != "hello" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	if got, err := sb.ReadFile(ctx, "a.txt", ".", 1<<20); err != nil || string(got) != "hello" {
		t.Fatalf("read: %q, %v", got, err)
	}
	if f := dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
}

// conversationActs reads the audit events of key's scope from the stream, each with what may
// differ between two runs of one conversation set aside: its IDs (the event's, the API
// engine's and handle, the instance, the request) and its times.
func conversationActs(t *testing.T, msgs []jetstream.Msg) []events.AuditEvent {
	t.Helper()
	var out []events.AuditEvent
	for _, m := range msgs {
		data := m.Data()
		var ev events.AuditEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("not an audit event: %v\n%s", err, data)
		}
		if ev.ID == "" || ev.Engine == "" || ev.Engine == "unknown" || ev.Time.IsZero() {
			t.Errorf("%s lacks its identity: %s", ev.Type, data)
		}
		ev.ID, ev.Time, ev.DurationMS, ev.Service, ev.Sandbox, ev.InstanceID, ev.RequestID = "", time.Time{}, 0, "", "", "", ""
		out = append(out, ev)
	}
	return out
}

// TestEmbeddedWorkerAuditsAsServeDoes: a Go worker built from actors.Create, sandbox.NewRouter
// and events.New alone — no service — runs a conversation (acquire, write, exec, read,
// dispose) and finds in its MAF_SANDBOX_AUDIT stream the same acts, with the same fields (IDs
// and times aside), as engine serve publishes for the same conversation driven over NATS; and
// its meter counts the acquire and times the command. Every act of the conversation must be
// there on both sides: one reported nowhere, or only at the NATS edge, fails it.
func TestEmbeddedWorkerAuditsAsServeDoes(t *testing.T) {
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))

	// The embedded worker: what a Go program that embeds the engine writes.
	ctx := itest.Context(t)
	dockertest.Require(t)
	b, err := actors.Create(ctx, docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second},
		actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	srv := natstest.Run(t)
	ev, err := events.New(ctx, natstest.Connect(t, srv), events.WithDaemon(b))
	if err != nil {
		b.Close(context.Background())
		t.Fatalf("new events: %v", err)
	}
	t.Cleanup(func() {
		b.Close(context.Background())
		_ = ev.Close(context.Background())
	})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	meter, err := telemetry.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer),
		sandbox.WithObserver(sandbox.Observers(ev, meter)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	runConversation(t, key, spec, router.Acquire, router.Dispose)
	if err := ev.Close(ctx); err != nil {
		t.Fatalf("the worker's events not delivered: %v", err)
	}
	scope := events.DefaultSubjectPrefix + ".audit." + events.Token(key.Scope) + ".>"
	embedded := conversationActs(t, readAudit(t, natstest.Connect(t, srv), scope, len(conversation)))
	checkWorkerMeter(t, reader, spec.Kind)

	// engine serve, the same conversation over NATS.
	nc, c := itest.ServeClient(t, itest.StartServe(t, nil))
	runConversation(t, key, spec, c.Acquire, c.Dispose)
	served := conversationActs(t, readAudit(t, nc, scope, len(conversation)))

	for side, acts := range map[string][]events.AuditEvent{"the embedded worker": embedded, "engine serve": served} {
		var types []string
		for _, a := range acts {
			types = append(types, a.Type)
		}
		if fmt.Sprint(types) != fmt.Sprint(conversation) {
			t.Errorf("%s recorded %v, want %v", side, types, conversation)
		}
	}
	if len(embedded) != len(served) {
		t.FailNow()
	}
	for i := range embedded {
		e, s := mustJSON(t, embedded[i]), mustJSON(t, served[i])
		if e != s {
			t.Errorf("act %d differs:\n embedded %s\n serve    %s", i, e, s)
		}
	}
}

// checkWorkerMeter reads the worker's meter: one acquire of kind counted, created, and one
// command timed.
func checkWorkerMeter(t *testing.T, r *sdkmetric.ManualReader, kind string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var acquires, execs int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != telemetry.NameAcquires {
					continue
				}
				for _, dp := range d.DataPoints {
					k, _ := dp.Attributes.Value(telemetry.KeyKind)
					o, _ := dp.Attributes.Value(telemetry.KeyOutcome)
					if k.AsString() == kind && o.AsString() == sandbox.OutcomeCreated {
						acquires += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				if m.Name != telemetry.NameExecDuration {
					continue
				}
				for _, dp := range d.DataPoints {
					execs += int64(dp.Count)
				}
			}
		}
	}
	if acquires != 1 || execs != 1 {
		t.Errorf("the worker's meter counts %d acquires created and %d commands timed, want 1 and 1", acquires, execs)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
