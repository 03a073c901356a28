package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// BenchmarkProtocolRoundTrip isolates what the NATS hop costs: the same calls on the
// in-memory fake backend, in process and through the client over an embedded server on
// loopback (no Docker underneath, no logging).
func BenchmarkProtocolRoundTrip(b *testing.B) {
	fake := newFake(b)
	srv := natstest.Run(b)
	router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		b.Fatalf("router: %v", err)
	}
	svc, err := service.New(natstest.Connect(b, srv), router)
	if err != nil {
		b.Fatalf("service: %v", err)
	}
	b.Cleanup(func() { _ = svc.Stop(context.Background()) })
	remote, err := client.New(context.Background(), natstest.Connect(b, srv))
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	ctx := context.Background()
	local, err := router.Acquire(ctx, testKey, testSpec(b))
	if err != nil {
		b.Fatalf("acquire: %v", err)
	}
	over, err := remote.Acquire(ctx, testKey, testSpec(b))
	if err != nil {
		b.Fatalf("acquire: %v", err)
	}
	for _, s := range []struct {
		name string
		sb   sandbox.Sandbox
	}{{"in-process", local}, {"nats", over}} {
		b.Run("exec-true/"+s.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("stat/"+s.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.sb.StatFile(ctx, ".", "."); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
