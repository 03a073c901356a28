package itest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// NATSEngine is the Docker backend served on an embedded NATS server.
type NATSEngine struct {
	Server  *server.Server
	Backend *actors.Backend
	Service *service.Service
}

// ServeBackend serves b (through a router floored at container isolation) on srv, reaping
// with b's sweep, and stops the service when the test ends.
func ServeBackend(t testing.TB, srv *server.Server, b *actors.Backend, opts ...service.Option) (*service.Service, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, srv)
	return ServeBackendOn(t, nc, b, opts...), nc
}

// ServeObserved is [ServeBackend] whose router reports every act to obs (events.Events, a
// metrics, both with sandbox.Observers), which it hands to b.
func ServeObserved(t testing.TB, srv *server.Server, b *actors.Backend, obs sandbox.Observer, opts ...service.Option) (*service.Service, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, srv)
	return ServeObservedOn(t, nc, b, obs, opts...), nc
}

// ServeBackendOn is [ServeBackend] on a connection the caller made (as a user of an account).
func ServeBackendOn(t testing.TB, nc *nats.Conn, b *actors.Backend, opts ...service.Option) *service.Service {
	t.Helper()
	return ServeObservedOn(t, nc, b, nil, opts...)
}

// ServeObservedOn is [ServeObserved] on a connection the caller made.
func ServeObservedOn(t testing.TB, nc *nats.Conn, b *actors.Backend, obs sandbox.Observer, opts ...service.Option) *service.Service {
	t.Helper()
	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer), sandbox.WithObserver(obs))
	if err != nil {
		t.Fatalf("new router: %v", err)
	}
	reap := service.ReaperFunc(func(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error) {
		var opts []reaper.Option
		if scope != "" {
			opts = append(opts, reaper.WithScope(scope))
		}
		return b.Reap(ctx, olderThan, opts...)
	})
	svc, err := service.New(nc, router, append([]service.Option{service.WithLogger(zaptest.NewLogger(t)), service.WithReaper(reap)}, opts...)...)
	if err != nil {
		t.Fatalf("new service: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop service: %v", err)
		}
	})
	return svc
}

// StartNATSEngine serves a new backend ([NewBackend]) on a new embedded NATS server
// ([ServeBackend]); both stop when the test ends.
func StartNATSEngine(t testing.TB) *NATSEngine {
	t.Helper()
	b := NewBackend(t)
	srv := natstest.Run(t)
	svc, _ := ServeBackend(t, srv, b)
	return &NATSEngine{Server: srv, Backend: b, Service: svc}
}

// Remote connects a client to e.
func (e *NATSEngine) Remote(t testing.TB, opts ...client.Option) *client.Backend {
	t.Helper()
	c, err := client.New(Context(t), natstest.Connect(t, e.Server), opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// AcquireRemote acquires through c and registers the key's disposal on the Docker backend
// itself, so cleanup works whatever became of the engines.
func AcquireRemote(t testing.TB, c *client.Backend, b *actors.Backend, key sandbox.Key, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	sb, err := c.Acquire(Context(t), key, spec)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return sb
}
