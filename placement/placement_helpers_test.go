package placement_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
)

// TestMain sweeps the cluster tests' containers; each test checks for leaked goroutines
// itself ([noLeaks]), since the Docker sweep and goleak each want to own TestMain.
func TestMain(m *testing.M) { dockertest.Main(m) }

// noLeaks registers, first so that it runs last, a check that the test left no goroutine.
func noLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// jsOn connects to url and returns its JetStream context; the connection closes with the test.
func jsOn(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// embedded starts an in-process server and returns its URL.
func embedded(t *testing.T) string {
	t.Helper()
	return natstest.Run(t).ClientURL()
}

// store opens a Store for engine over its own connection to url, closed with the test.
func store(t *testing.T, url, engine string, opts ...placement.Option) *placement.Store {
	t.Helper()
	_, js := jsOn(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := placement.New(ctx, js, engine, opts...)
	if err != nil {
		t.Fatalf("placement.New(%s): %v", engine, err)
	}
	t.Cleanup(s.Close)
	return s
}

// eventually polls cond every 20 ms until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
