package service

import (
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkRoundTrip times one call on a warm Docker sandbox in process (the actors
// backend's own handle) and over NATS (the client, through an engine on an embedded server
// on loopback): exec of `true`, and a stat of the storage base. The difference is what the
// NATS hop costs; docs/benchmarks.md records the figures.
func BenchmarkRoundTrip(b *testing.B) {
	backend := itest.NewBackend(b)
	srv := natstest.Run(b)
	itest.ServeBackend(b, srv, backend)
	e := &itest.NATSEngine{Server: srv, Backend: backend}
	remote := e.Remote(b)
	spec := itest.BusyboxSpec(b, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	subjects := []struct {
		name string
		sb   sandbox.Sandbox
	}{
		{"in-process", itest.Acquire(b, backend, itest.NewKey(b), spec)},
		{"nats", itest.AcquireRemote(b, remote, backend, itest.NewKey(b), spec)},
	}
	ops := []struct {
		name string
		call func(sb sandbox.Sandbox) error
	}{
		{"exec-true", func(sb sandbox.Sandbox) error {
			res, err := sb.Exec(itest.Context(b), sandbox.Argv("true"), ".", time.Minute)
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("true exited %d", res.ExitCode)
			}
			return err
		}},
		{"stat", func(sb sandbox.Sandbox) error {
			_, err := sb.StatFile(itest.Context(b), ".", ".")
			return err
		}},
	}
	for _, op := range ops {
		for _, s := range subjects {
			b.Run(op.name+"/"+s.name, func(b *testing.B) {
				for b.Loop() {
					if err := op.call(s.sb); err != nil {
						b.Fatalf("%s: %v", op.name, err)
					}
				}
			})
		}
	}
}
