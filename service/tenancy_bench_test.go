package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// BenchmarkTenancyCall is what the identity check adds to a call through a real server: the
// same exec and stat on the in-memory fake, by tenant A through its service import, on an
// engine without and with tenancy (no Docker, no logging).
func BenchmarkTenancyCall(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []service.Option
	}{{"single-tenant", nil}, {"tenancy", []service.Option{service.WithTenancy(nil)}}} {
		b.Run(mode.name, func(b *testing.B) {
			srv := natstest.RunTenants(b, "engine", messages.DefaultPrefix, "A")
			router, err := sandbox.NewRouter([]sandbox.Backend{newFake(b)}, sandbox.WithMinIsolation(sandbox.IsolationNone))
			if err != nil {
				b.Fatalf("router: %v", err)
			}
			svc, err := service.New(natstest.ConnectAs(b, srv, "engine"), router, mode.opts...)
			if err != nil {
				b.Fatalf("service: %v", err)
			}
			b.Cleanup(func() { _ = svc.Stop(context.Background()) })
			remote, err := client.New(context.Background(), natstest.ConnectAs(b, srv, "A"))
			if err != nil {
				b.Fatalf("client: %v", err)
			}
			ctx := context.Background()
			sb, err := remote.Acquire(ctx, sandbox.Key{Scope: "A", ThreadID: "t", AgentID: "a"}, testSpec(b))
			if err != nil {
				b.Fatalf("acquire: %v", err)
			}
			b.Run("exec-true", func(b *testing.B) {
				for b.Loop() {
					if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("stat", func(b *testing.B) {
				for b.Loop() {
					if _, err := sb.StatFile(ctx, ".", "."); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
