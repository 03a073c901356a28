package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// TestOTLPTracesOfTheBackend runs engine serve with --otlp-endpoint pointed at a real Jaeger,
// the archive file plane and an egress proxy image, and reads three traces back from Jaeger's
// query API, each begun under a span of the test's own: an exec's, whose "container exec"
// span is the child of the engine's exec span and the parent of the daemon's exec call; a
// file write's, whose "file write" span names the archive plane and holds the freeze, under
// which the daemon's pause, copy and unpause run; and an allowlisted acquire's, whose
// "egress seal" span is the acquire's child, says the network is sealed, and holds the reads
// of the proxy's log.
func TestOTLPTracesOfTheBackend(t *testing.T) {
	dockertest.Require(t)
	jaeger := jaegerBinary(t)
	egressImages(t)
	otlpAddr, queryAddr := freeAddr(t), freeAddr(t)
	startJaeger(t, jaeger, otlpAddr, queryAddr)
	natsURL := itest.StartServe(t, []string{actors.FilePlaneEnv + "=" + string(actors.FilePlaneArchive)},
		"--otlp-endpoint", "http://"+otlpAddr, "--egress-proxy-image", images.ProxyTag)

	ctx := itest.Context(t)
	c := remoteClient(t, natsURL)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// traced runs call under a span of the test's own and returns the trace Jaeger stored
	// once it holds a span named last: the engine's span of the call, which ends after its
	// children, so they were exported with it or before.
	traced := func(name, last string, call func(ctx context.Context)) jaegerTrace {
		t.Helper()
		sctx, caller := tp.Tracer("test").Start(ctx, name)
		call(sctx)
		caller.End()
		return awaitTrace(t, queryAddr, caller.SpanContext().TraceID().String(), last)
	}
	cleanup := egressCleanup(t) // only to dispose whatever the test leaves
	sb := itest.AcquireRemote(t, c, cleanup, itest.NewKey(t), itest.BusyboxSpec(t))

	tr := traced("agent runs a command", "exec", func(ctx context.Context) {
		if _, err := sb.Exec(ctx, sandbox.Shell("echo hi"), ".", time.Minute); err != nil {
			t.Fatalf("exec: %v", err)
		}
	})
	run := tr.child(t, "exec", actors.SpanExec)
	if got := run.tag("process.exit.code"); got != "0" {
		t.Errorf("container exec's exit code tag = %q, want 0", got)
	}
	tr.child(t, actors.SpanExec, actors.SpanExecChannel) // engine serve's default path for a closed busybox sandbox

	tr = traced("agent writes a file", "write_file", func(ctx context.Context) {
		if err := sb.WriteFile(ctx, "note.txt", []byte("traced"), "."); err != nil {
			t.Fatalf("write: %v", err)
		}
	})
	write := tr.child(t, "write_file", actors.SpanFilePrefix+"write")
	if got := write.tag(string(actors.KeyFilePlane)); got != string(actors.FilePlaneArchive) {
		t.Errorf("file write's plane tag = %q, want archive", got)
	}
	tr.child(t, actors.SpanFilePrefix+"write", actors.SpanFreeze)
	for _, op := range []string{"docker pause", "docker cp", "docker unpause"} {
		tr.child(t, actors.SpanFreeze, op)
	}

	fetchKey := itest.NewKey(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := cleanup.Dispose(ctx, fetchKey, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", fetchKey, f)
		}
	})
	tr = traced("agent acquires an allowlisted sandbox", "acquire", func(ctx context.Context) {
		if _, err := c.Acquire(ctx, fetchKey, fetcherSpec(t)); err != nil {
			t.Fatalf("acquire the fetcher: %v", err)
		}
	})
	seal := tr.child(t, "acquire", actors.SpanSeal)
	if got := seal.tag(string(actors.KeySeal)); got != "sealed" {
		t.Errorf("egress seal's verdict tag = %q, want sealed", got)
	}
	tr.child(t, actors.SpanSeal, "docker logs")
}

// awaitTrace polls Jaeger until trace id holds a span named op, a minute at most.
func awaitTrace(t *testing.T, queryAddr, id, op string) jaegerTrace {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		tr, err := getTrace(queryAddr, id)
		if err == nil && tr.has(op) {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace %s with a %q span in Jaeger within a minute: %v; got %+v", id, op, err, tr)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// child returns a span named op whose parent is the one span named parent, failing the test
// when there is no such parent or child.
func (tr jaegerTrace) child(t *testing.T, parent, op string) jaegerSpan {
	t.Helper()
	ps := tr.named(parent)
	if len(ps) != 1 {
		t.Fatalf("trace %s has %d %q spans, want 1: %v", tr.TraceID, len(ps), parent, tr.names())
	}
	for _, s := range tr.named(op) {
		if s.parent() == ps[0].SpanID {
			return s
		}
	}
	t.Fatalf("trace %s has no %q span under %q: %v", tr.TraceID, op, parent, tr.names())
	return jaegerSpan{}
}

// names lists each span as "name<-parent name", for failure messages.
func (tr jaegerTrace) names() []string {
	byID := map[string]string{}
	for _, s := range tr.Spans {
		byID[s.SpanID] = s.OperationName
	}
	var out []string
	for _, s := range tr.Spans {
		out = append(out, s.OperationName+"<-"+byID[s.parent()])
	}
	return out
}
