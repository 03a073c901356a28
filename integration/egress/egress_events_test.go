package egress

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

const eventsEngineID = "e2e-engine"

// TestEgressEventsOverNATS follows windows from real allowlisted sandboxes to a NATS
// subscriber (egress-and-reap.md §3.4, §3.7, §5.5): a fresh process's scope purge publishes
// exactly one event for a proxy another process made, and a window drained while NATS is
// down is kept and arrives, once, after NATS restarts.
func TestEgressEventsOverNATS(t *testing.T) {
	fx := newEgressFixture(t)
	ctx := itest.Context(t)
	prefix := "maf.e2e." + randomHex(t)
	opts := natstest.Options(t.TempDir()) // the store outlives the first server
	opts.Port = freePort(t)
	srv := natstest.RunWithOptions(t, opts)

	// The engine's side: a reconnecting connection, the JetStream publisher and its outbox.
	nc := natstest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	pub, err := events.NewJetStreamPublisher(nc, events.WithSubjectPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	box, err := events.NewOutbox(pub, events.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close(context.Background()) })
	sink := box.WindowSink(prefix, eventsEngineID)
	owner := egressBackend(t, fx.network)

	// A subscriber in any language sees core NATS deliveries of the stream's subject.
	subNC := natstest.Connect(t, srv)
	sub, err := subNC.SubscribeSync(prefix + ".egress.observed.>")
	if err != nil {
		t.Fatal(err)
	}

	first := itest.NewKey(t)
	useAllowlist(t, owner, first, fx)
	// Another process, knowing nothing of the key, purges the conversation.
	fresh := egressBackend(t, fx.network, actors.WithObserver(sink))
	if p := fresh.DisposeScope(ctx, first.Scope, first.ThreadID); p.Disposed != 1 || p.Undisposed != nil {
		t.Fatalf("fresh scope purge: %+v", p)
	}
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no event for the purged window: %v", err)
	}
	checkEvent(t, m.Data, m.Header.Get(events.HeaderMsgID), first, egresslog.TriggerDisposeScope)
	if extra, err := sub.NextMsg(time.Second); err == nil {
		t.Fatalf("a second event for one window: %s", extra.Data)
	}

	// NATS goes away; the window drained meanwhile must wait in the outbox, not vanish.
	second := itest.NewKey(t)
	useAllowlist(t, fresh, second, fx)
	srv.Shutdown()
	srv.WaitForShutdown()
	if f := fresh.Dispose(ctx, second, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose while NATS is down: %v", f)
	}
	if st := box.Stats(); st.Pending != 1 || st.Delivered != 1 {
		t.Fatalf("outbox while NATS is down: %+v, want the window held", st)
	}
	again := natstest.Options(opts.StoreDir)
	again.Port = opts.Port
	restarted := natstest.RunWithOptions(t, again)
	for deadline := time.Now().Add(30 * time.Second); box.Stats().Delivered < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the held window was not delivered after NATS returned: %+v", box.Stats())
		}
	}

	// The stream, persisted across the restart, holds exactly the two windows.
	js, err := jetstream.New(natstest.Connect(t, restarted))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamEgress, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for msg := range batch.Messages() {
		got = append(got, msg)
	}
	if len(got) != 2 {
		t.Fatalf("stream holds %d events, want 2 (one per window)", len(got))
	}
	checkEvent(t, got[0].Data(), got[0].Headers().Get(events.HeaderMsgID), first, egresslog.TriggerDisposeScope)
	checkEvent(t, got[1].Data(), got[1].Headers().Get(events.HeaderMsgID), second, egresslog.TriggerDispose)
}

// useAllowlist acquires an allowlisted sandbox for key and makes one allowed and one denied
// request through its proxy.
func useAllowlist(t *testing.T, b *actors.Backend, key sandbox.Key, fx *egressFixture) {
	t.Helper()
	ctx := itest.Context(t)
	sb := itest.Acquire(t, b, key, allowlistSpec(t, images.ClientTag, allowedHost))
	for _, host := range []string{allowedHost, deniedHost} {
		if _, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+host+"/", fx.caB64), "/", time.Minute); err != nil {
			t.Fatalf("exec: %v", err)
		}
	}
}

// checkEvent decodes an egress.observed/v1 payload as a subscriber would and checks it is
// key's window: one allowed and one denied request, the stable event ID as the message ID.
func checkEvent(t *testing.T, data []byte, msgID string, key sandbox.Key, trigger egresslog.Trigger) {
	t.Helper()
	var ev events.EgressObservedEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	want := messages.APIKey{Scope: key.Scope, ThreadID: key.ThreadID, AgentID: key.AgentID, CallID: key.CallID}
	if ev.Schema != events.SchemaEgressObserved || ev.Key != want || ev.Attribution != string(egresslog.AttributionLabel) ||
		ev.Trigger != string(trigger) || ev.EngineID != eventsEngineID || msgID != ev.EventID ||
		ev.EventID != events.EgressEventID(ev.Proxy.ContainerID) || ev.Counts != (events.EventCounts{Allow: 1, Deny: 1}) ||
		len(ev.Decisions) != 2 || ev.Decisions[0].Host != allowedHost || ev.Decisions[1].Host != deniedHost ||
		!strings.HasSuffix(ev.Proxy.Name, "-proxy") {
		t.Fatalf("event for %+v (trigger %s, message ID %s):\n%s", key, trigger, msgID, data)
	}
}

// freePort returns a loopback port nothing listens on now, so a restarted server can take
// the same URL its clients reconnect to.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestEgressFreshReapPublishesOnce: a process that never saw the sandbox reaps it by age
// and publishes its proxy's window exactly once, filed under the key the proxy's label names
// (egress-and-reap.md §4.8, §5.5).
func TestEgressFreshReapPublishesOnce(t *testing.T) {
	fx := newEgressFixture(t)
	ctx := itest.Context(t)
	owner := egressBackend(t, fx.network)
	key := itest.NewKey(t)
	useAllowlist(t, owner, key, fx)
	time.Sleep(1200 * time.Millisecond) // older than the one-second lifetime below

	sink := &recordingSink{}
	fresh := egressBackend(t, fx.network, actors.WithObserver(sink))
	for sweep := 1; sweep <= 2; sweep++ {
		got, err := fresh.Reap(ctx, time.Second, reaper.WithScope(key.Scope))
		if err != nil || len(got.Failures) != 0 {
			t.Fatalf("sweep %d: %+v %v", sweep, got, err)
		}
		want := [3]int{1, 1, 1}
		if sweep == 2 {
			want = [3]int{}
		}
		if c := [3]int{got.Disposed, got.ProxiesRemoved, got.NetworksRemoved}; c != want {
			t.Fatalf("sweep %d removed (sandboxes, proxies, networks) %v, want %v", sweep, c, want)
		}
	}
	ws := sink.got()
	if len(ws) != 1 {
		t.Fatalf("%d windows, want exactly one", len(ws))
	}
	w := ws[0]
	if w.Key != key || w.Trigger != string(egresslog.TriggerReap) || w.Attribution != string(egresslog.AttributionLabel) ||
		len(w.Decisions) != 2 || w.Decisions[0].Host != allowedHost || w.Decisions[1].Decision != sandbox.DecisionDeny {
		t.Fatalf("reaped window %+v", w)
	}
}
