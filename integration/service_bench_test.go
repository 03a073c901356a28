package integration

import (
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// BenchmarkRoundTrip times one call on a warm Docker sandbox in process (the actors
// backend's own handle) and over NATS (the client, through an engine on an embedded server
// on loopback): exec of `true`, and a stat of the storage base. The difference is what the
// NATS hop costs; docs/benchmarks.md records the figures.
func BenchmarkRoundTrip(b *testing.B) {
	backend := newBackend(b)
	srv := natstest.Run(b)
	serveBackend(b, srv, backend)
	e := &natsEngine{srv: srv, backend: backend}
	remote := e.remote(b)
	spec := busyboxSpec(b, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	subjects := []struct {
		name string
		sb   sandbox.Sandbox
	}{
		{"in-process", acquire(b, backend, newKey(b), spec)},
		{"nats", acquireRemote(b, remote, backend, newKey(b), spec)},
	}
	ops := []struct {
		name string
		call func(sb sandbox.Sandbox) error
	}{
		{"exec-true", func(sb sandbox.Sandbox) error {
			res, err := sb.Exec(ctxT(b), sandbox.Argv("true"), ".", time.Minute)
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("true exited %d", res.ExitCode)
			}
			return err
		}},
		{"stat", func(sb sandbox.Sandbox) error {
			_, err := sb.StatFile(ctxT(b), ".", ".")
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
