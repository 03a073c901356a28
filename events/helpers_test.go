package events

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

const testProxyID = "3f9c000000000000000000000000000000000000000000000000000000000001"

// testWindow is a drained, attributed window of three decisions (egresslog's tests build the
// same one).
func testWindow() sandbox.EgressWindow {
	return sandbox.EgressWindow{
		ProxyID: testProxyID, ProxyName: "maf-sandbox-docker-0123456789ab-proxy", Kind: "codeact",
		Key:         sandbox.Key{Scope: "tenant-1", ThreadID: "t-1", AgentID: "devops"},
		Attribution: string(egresslog.AttributionLabel), PrivateCIDRs: "10.213.0.0/24,10.9.0.0/16",
		Start: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), End: time.Date(2026, 5, 1, 12, 5, 0, 0, time.UTC), Closed: true,
		Decisions: []sandbox.EgressDecision{
			{Decision: sandbox.DecisionAllow, Host: "allowed.example", Port: 443, At: time.Date(2026, 5, 1, 12, 0, 1, 5, time.UTC)},
			{Decision: sandbox.DecisionDeny, Host: "evil.example", Port: 443},
			{Decision: sandbox.DecisionDenyNonGlobal, Host: "10.0.0.1", Port: 443},
		},
		Trigger: string(egresslog.TriggerDispose), Removal: "removed", DrainSeconds: 0.41,
	}
}

// runNATS starts an embedded server on 127.0.0.1 with JetStream storing under dir, on port
// (-1: a random one), and shuts it down when the test ends. (internal/natstest does the same;
// this package's tests keep their own so a restart on the same port and store is one call.)
func runNATS(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true, JetStream: true, StoreDir: dir})
	if err != nil {
		t.Fatalf("new nats server: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready within 10s")
	}
	return s
}

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// streamMessages fetches every message of stream from the start.
func streamMessages(t *testing.T, nc *nats.Conn, stream string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for uint64(len(out)) < info.State.Msgs {
		batch, err := c.Fetch(int(info.State.Msgs)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, m)
			n++
		}
		if n == 0 {
			t.Fatalf("stream %s: fetched %d of %d", stream, len(out), info.State.Msgs)
		}
	}
	return out
}
