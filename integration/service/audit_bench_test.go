package service

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkAuditCost times an exec and a file write over NATS on a warm Docker sandbox,
// through two engines, each on a backend of its own (a backend reports to the router built
// over it last): one recording the audit stream to JetStream, one without. The sub-benchmarks alternate, so `-count N` interleaves them; benchstat of
// audit=off against audit=on is the audit's cost (docs/benchmarks.md, "The audit stream").
func BenchmarkAuditCost(b *testing.B) {
	spec := itest.BusyboxSpec(b, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	engines := map[string]sandbox.Sandbox{}
	for _, audit := range []bool{false, true} {
		backend := itest.NewBackend(b)
		srv := natstest.Run(b)
		var obs sandbox.Observer
		name := "audit=off"
		if audit {
			ev, err := events.New(itest.Context(b), natstest.Connect(b, srv))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = ev.Close(ctx)
			})
			obs, name = ev, "audit=on"
		}
		itest.ServeObserved(b, srv, backend, obs)
		e := &itest.NATSEngine{Server: srv, Backend: backend}
		engines[name] = itest.AcquireRemote(b, e.Remote(b), backend, itest.NewKey(b), spec)
	}
	content := make([]byte, 4096)
	ops := []struct {
		name string
		call func(sb sandbox.Sandbox) error
	}{
		{"exec-true", func(sb sandbox.Sandbox) error {
			_, err := sb.Exec(itest.Context(b), sandbox.Argv("true"), ".", time.Minute)
			return err
		}},
		{"write-4KiB", func(sb sandbox.Sandbox) error {
			return sb.WriteFile(itest.Context(b), "f.bin", content, ".")
		}},
	}
	for _, op := range ops {
		for _, name := range []string{"audit=off", "audit=on"} {
			sb := engines[name]
			b.Run(op.name+"/"+name, func(b *testing.B) {
				for b.Loop() {
					if err := op.call(sb); err != nil {
						b.Fatalf("%s: %v", op.name, err)
					}
				}
			})
		}
	}
}
