package egress

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// A Go worker that embeds the engine — actors.Create and events.New, nothing of cmd/engine —
// gets what engine serve gets, recovery included. Two engines die with a window each in the
// pending store: one after its proxy's removal, before publishing (the window is nowhere
// else), one after the stream acknowledged the window (a repeat for the stream to drop).
// The worker that starts next publishes the first from its pending record, on the recovery
// pass events.New starts, and the second again as a repeat; its own allowlisted sandbox's
// window goes through the same pending store. Every window is in the stream exactly once and
// nothing is left pending.
func TestEmbeddedWorkerRecoversPendingWindows(t *testing.T) {
	fx := newEgressFixture(t)
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	prefix := "maf.e2e." + randomHex(t)
	ctx := itest.Context(t)
	pub, err := events.NewJetStreamPublisher(nc, events.WithSubjectPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	cleanup := egressBackend(t, fx.network, actors.WithLogger(log)) // removes whatever a failure leaves
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	egressID := docker.EgressID(images.ProxyTag, sandbox.EgressHosts(spec.EgressAllow))
	pending := daemonPendingStore(t, nc, prefix)
	want := map[string]egresslog.Trigger{} // proxy ID → the drain whose window is in the stream
	proxyOf := func(key sandbox.Key) string {
		return strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Id}}",
			docker.ProxyName(docker.ContainerName(key, spec.Kind, egressID))))
	}
	for _, when := range []int{dieAfterRemoval, dieAfterPublish} {
		key := itest.NewKey(t)
		t.Cleanup(func() { _ = cleanup.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
		b, s, err := dyingEngine(ctx, t, eventsConfig(fx), pub, pending, prefix, when, log)
		if err != nil {
			t.Fatal(err)
		}
		useAllowlist(t, b, key, fx)
		want[proxyOf(key)] = egresslog.TriggerDispose
		_ = b.Dispose(ctx, key, sandbox.DisposeOptions{}) // it dies in there, its proxy removed
		if !s.drv.dead.Load() {
			t.Fatalf("the engine dying at %d did not die", when)
		}
		// What the dead engine left (its workload and network; its proxy is gone) goes now,
		// so its own backend's clean-up finds nothing to refuse.
		if err := cleanup.Dispose(ctx, key, sandbox.DisposeOptions{}); err != nil {
			t.Fatalf("dispose what the engine dying at %d left: %v", when, err)
		}
	}
	if left, err := pending.List(ctx); err != nil || len(left) != 2 {
		t.Fatalf("pending records the dead engines left: %d (%v), want 2", len(left), err)
	}
	if got := streamWindows(t, nc, prefix); len(got) != 1 {
		t.Fatalf("before the worker the stream holds %v, want only the window acknowledged before its engine died", got)
	}

	// The worker: what an embedding Go program writes. The backend is the events' daemon, and
	// the router hands the events to the backend.
	b, err := actors.Create(ctx, eventsConfig(fx), actors.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.New(ctx, natstest.Connect(t, srv), events.WithPrefix(prefix), events.WithDaemon(b), events.WithLogger(log))
	if err != nil {
		b.Close(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close(context.Background())
		_ = ev.Close(context.Background())
	})
	if _, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer), sandbox.WithObserver(ev)); err != nil {
		t.Fatal(err)
	}
	key := itest.NewKey(t)
	t.Cleanup(func() { _ = cleanup.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	useAllowlist(t, b, key, fx)
	want[proxyOf(key)] = egresslog.TriggerDispose
	if err := b.Dispose(ctx, key, sandbox.DisposeOptions{}); err != nil {
		t.Fatal(err)
	}

	var got map[string]int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got = streamWindows(t, nc, prefix)
		left, err := pending.List(ctx)
		if err == nil && len(got) == len(want) && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %v and %d records are pending (%v); want one window each of %v and none pending", got, len(left), err, want)
		}
	}
	if err := ev.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got = streamWindows(t, nc, prefix) // the last word, after the worker delivered everything
	for id := range want {
		if got[id] != 1 {
			t.Errorf("the window of %s is in the stream %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("the stream holds %v, want one window each of %v", got, want)
	}
}

// streamWindows counts the egress windows in the stream under prefix, by proxy ID.
func streamWindows(t *testing.T, nc *nats.Conn, prefix string) map[string]int {
	t.Helper()
	ctx := itest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamEgress, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for m := range batch.Messages() {
		var ev events.EgressObservedEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		seen[ev.Proxy.ContainerID]++
	}
	return seen
}
