package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// readyTimeout bounds how long [Run] waits for the server to accept connections.
const readyTimeout = 10 * time.Second

// Options returns the options [Run] starts a server with: 127.0.0.1, a random port, no
// logging, no signal handlers, and JetStream storing under dir.
func Options(dir string) *server.Options {
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  dir,
	}
}

// Run starts an embedded server with [Options] on t.TempDir() and waits until it accepts
// connections. It calls t.Fatal (it never panics) when the server cannot be built or is not
// ready within 10 s. Its shutdown, waited for, is registered with t.Cleanup.
func Run(t testing.TB) *server.Server {
	t.Helper()
	return RunWithOptions(t, Options(t.TempDir()))
}

// RunWithOptions is [Run] with the caller's options, for tests that need another port, a
// store directory that outlives one server, or authentication.
func RunWithOptions(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		t.Fatalf("natstest: server not ready for connections within %s", readyTimeout)
	}
	return s
}

// Connect opens a client connection to s and closes it when the test ends. Extra options
// are applied after the defaults (no reconnect attempts beyond the client's defaults). It
// calls t.Fatal when the connection fails.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}
