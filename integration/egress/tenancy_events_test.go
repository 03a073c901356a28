package egress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestTenancyEgressEvents: the per-tenant export of egress windows (docs/operations.md#tenancy,
// natstest.RunTenants) on a real nats-server with accounts. The engine's account publishes the
// windows of two tenants' allowlisted sandboxes, each scope named as its tenant; each tenant,
// subscribed to every event subject in its own account, receives its own window and nothing
// of the other's.
func TestTenancyEgressEvents(t *testing.T) {
	fx := newEgressFixture(t)
	ctx := itest.Context(t)
	suffix := randomHex(t)
	a, b := "it-ea-"+suffix, "it-eb-"+suffix
	srv := natstest.RunTenants(t, "engine", messages.DefaultPrefix, a, b)

	pub, err := events.NewJetStreamPublisher(natstest.ConnectAs(t, srv, "engine"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	box, err := events.NewOutbox(pub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close(context.Background()) })
	backend := egressBackend(t, fx.network, actors.WithObserver(box.WindowSink(events.DefaultSubjectPrefix, eventsEngineID)))

	subs := map[string]*nats.Subscription{}
	for _, acc := range []string{a, b} {
		nc := natstest.ConnectAs(t, srv, acc)
		sub, err := nc.SubscribeSync(events.DefaultSubjectPrefix + ".>")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		subs[acc] = sub
	}
	keys := map[string]sandbox.Key{}
	for _, acc := range []string{a, b} {
		keys[acc] = sandbox.Key{Scope: acc, ThreadID: "thread", AgentID: "agent"}
		useAllowlist(t, backend, keys[acc], fx)
		if f := backend.Dispose(ctx, keys[acc], sandbox.DisposeOptions{}); f != nil { // drains the window
			t.Fatalf("dispose %s: %v", keys[acc], f)
		}
	}
	for acc, other := range map[string]string{a: b, b: a} {
		own := 0
		for deadline := time.Now().Add(30 * time.Second); ; {
			m, err := subs[acc].NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			if strings.Contains(m.Subject, "."+other+".") || strings.Contains(string(m.Data), other) {
				t.Errorf("%s saw an event of %s: %s", acc, other, m.Subject)
				continue
			}
			if !strings.HasPrefix(m.Subject, events.DefaultSubjectPrefix+".egress.observed."+acc+".") {
				t.Errorf("%s saw an unexpected subject %s", acc, m.Subject)
				continue
			}
			checkEvent(t, m.Data, m.Header.Get(events.HeaderMsgID), keys[acc], egresslog.TriggerDispose)
			own++
			deadline = time.Now().Add(time.Second) // its window came: wait a moment for strays
		}
		if own != 1 {
			t.Errorf("%s received %d windows of its own, want 1", acc, own)
		}
	}
}
