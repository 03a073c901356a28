package events

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkAuditThroughput records audit events as fast as a caller can and reports how many
// per second reach the JetStream stream (a real embedded server, file storage), each
// acknowledged, none refused: the engine's sustained audit rate (docs/benchmarks.md).
func BenchmarkAuditThroughput(b *testing.B) {
	srv := runNATS(b, -1, b.TempDir())
	nc := connect(b, srv.ClientURL())
	ev, err := New(b.Context(), nc, WithAuditOutbox(WithCapacity(1<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ev.Close(b.Context()) })
	audit := ev.Audit()
	start := time.Now()
	i := 0
	for b.Loop() {
		i++
		audit.Record(benchEvent(i))
	}
	for ev.AuditStats().Pending > 0 {
		time.Sleep(time.Millisecond)
	}
	st := ev.AuditStats()
	if st.Refused > 0 || st.Failed > 0 {
		b.Fatalf("%+v: events refused or failed", st)
	}
	b.ReportMetric(float64(st.Delivered)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAuditHeld measures what an audit event costs in memory while NATS is away: the
// outbox holds b.N events that cannot be delivered.
func BenchmarkAuditHeld(b *testing.B) {
	srv := runNATS(b, -1, b.TempDir())
	nc := connect(b, srv.ClientURL())
	ev, err := New(b.Context(), nc, WithAuditOutbox(WithCapacity(1<<22)))
	if err != nil {
		b.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	audit := ev.Audit()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i := 0
	for b.Loop() {
		i++
		audit.Record(benchEvent(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if held := ev.AuditStats().Pending; held != i {
		b.Fatalf("held %d of %d", held, i)
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(i), "heap-B/held-event")
}

func benchEvent(i int) AuditEvent {
	code := 0
	return AuditEvent{Type: AuditExecFinished, RequestID: fmt.Sprintf("req-%d", i), Sandbox: "sb_8Qx2", Kind: "codeact",
		Key: &messages.APIKey{Scope: "tenant-1", ThreadID: "t-1", AgentID: "devops"}, InstanceID: "4e1f5c2d9a7b", Outcome: sandbox.OutcomeOK,
		Traceparent: "00-4b010203000000000000000000000000-a102000000000000-01", DurationMS: 41.7,
		Exec: &AuditExec{Form: "argv", Argv0: "python3", CommandSHA256: func() string {
			_, d := sandbox.CommandDigest([]string{"python3", "-c", "print(1)"}, "", sandbox.FormArgv)
			return d
		}(), ExitCode: &code, StdoutBytes: 2}}
}

// BenchmarkObserveExec is what reporting one act costs the goroutine that did it: the
// events' observer maps a finished command to its audit event, encodes it and enqueues it
// (publishing runs on the outbox's own goroutine).
func BenchmarkObserveExec(b *testing.B) {
	srv := runNATS(b, -1, b.TempDir())
	nc := connect(b, srv.ClientURL())
	ev, err := New(b.Context(), nc, WithAuditOutbox(WithCapacity(1<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ev.Close(b.Context()) })
	ctx := sandbox.WithCall(b.Context(), sandbox.Call{RequestID: "req-1", Service: "svc", Handle: func(string) string { return "sb_8Qx2" }})
	argv0, sum := sandbox.CommandDigest([]string{"python3", "-c", "print(1)"}, "", sandbox.FormArgv)
	act := sandbox.ExecFinished{Act: sandbox.Act{Key: sandbox.Key{Scope: "tenant-1", ThreadID: "t-1", AgentID: "devops"}, Kind: "codeact",
		Backend: "docker", InstanceID: "4e1f5c2d9a7b", Took: 41 * time.Millisecond}, Form: sandbox.FormArgv, Argv0: argv0, CommandSHA256: sum, StdoutBytes: 2}
	b.ReportAllocs()
	for b.Loop() {
		ev.ExecFinished(ctx, act)
	}
}
