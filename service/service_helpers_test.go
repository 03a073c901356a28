package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

// engine is a service over a fake backend on an embedded server.
type engine struct {
	srv  *server.Server
	nc   *nats.Conn
	svc  *service.Service
	fake *sandboxtest.Backend
}

// newFake builds a fake backend declaring every capability, so every call can be served.
func newFake(t testing.TB, opts ...sandboxtest.Option) *sandboxtest.Backend {
	t.Helper()
	d := sandboxtest.DefaultDeclarations()
	d.Capabilities = sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesList,
		sandbox.FilesDelete, sandbox.Reclaim, sandbox.Snapshot, sandbox.RunCode)
	b, err := sandboxtest.New(append([]sandboxtest.Option{sandboxtest.WithDeclarations(d),
		sandboxtest.WithSandboxOptions(sandboxtest.WithReset())}, opts...)...)
	if err != nil {
		t.Fatalf("new fake backend: %v", err)
	}
	return b
}

// startEngine serves backend on a fresh embedded server and stops the service when the test
// ends.
func startEngine(t testing.TB, backend sandbox.Backend, opts ...service.Option) *engine {
	t.Helper()
	srv := natstest.Run(t)
	return startEngineOn(t, srv, backend, opts...)
}

func startEngineOn(t testing.TB, srv *server.Server, backend sandbox.Backend, opts ...service.Option) *engine {
	t.Helper()
	return startObservedEngineOn(t, srv, backend, nil, opts...)
}

// startObservedEngineOn is startEngineOn whose router reports every act to obs.
func startObservedEngineOn(t testing.TB, srv *server.Server, backend sandbox.Backend, obs sandbox.Observer, opts ...service.Option) *engine {
	t.Helper()
	nc := natstest.Connect(t, srv)
	router, err := sandbox.NewRouter([]sandbox.Backend{backend}, sandbox.WithMinIsolation(sandbox.IsolationNone), sandbox.WithObserver(obs))
	if err != nil {
		t.Fatalf("new router: %v", err)
	}
	svc, err := service.New(nc, router, append([]service.Option{service.WithLogger(zaptest.NewLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop service: %v", err)
		}
	})
	fake, _ := backend.(*sandboxtest.Backend)
	return &engine{srv: srv, nc: nc, svc: svc, fake: fake}
}

// newClient connects a client to e's server.
func newClient(t testing.TB, e *engine, opts ...client.Option) *client.Backend {
	t.Helper()
	nc := natstest.Connect(t, e.srv)
	c, err := client.New(ctxT(t), nc, append([]client.Option{client.WithLogger(zaptest.NewLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var testKey = sandbox.Key{Scope: "tenant", ThreadID: "thread", AgentID: "agent"}

func testSpec(t testing.TB, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	s, err := sandbox.NewSpec("shell", append([]sandbox.SpecOption{sandbox.WithImage("fake"),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete)}, opts...)...)
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	return s
}

// wrapped is a fake backend whose acquire hands out wrap(the fake's sandbox).
type wrapped struct {
	*sandboxtest.Backend
	wrap func(sandbox.Sandbox) sandbox.Sandbox
}

func (w *wrapped) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := w.Backend.Acquire(ctx, key, spec)
	if err != nil {
		return nil, err
	}
	return w.wrap(sb), nil
}

// streaming emits "first\n" on stdout, waits for the test to say it saw it, then emits
// "second\n" on stderr and ends: a chunk that reaches the client before the command ends is
// the only way the test can go on.
type streaming struct {
	sandbox.Sandbox
	seen chan struct{}
}

func (s *streaming) ExecStreaming(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration, maxOutput int64,
	emit func(string, []byte)) (sandbox.ExecResult, error) {
	emit(service.StreamStdout, []byte("first\n"))
	select {
	case <-s.seen:
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	}
	emit(service.StreamStderr, []byte("second\n"))
	return sandbox.ExecResult{StdoutBytes: []byte("first\n"), StderrBytes: []byte("second\n"), ExitCode: 3}, nil
}

// blocking holds every Exec until release is closed, telling started when it begins.
type blocking struct {
	sandbox.Sandbox
	started chan struct{}
	release chan struct{}
}

func (b *blocking) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	}
	return sandbox.ExecResult{StdoutBytes: []byte("done"), ExitCode: 0}, nil
}
