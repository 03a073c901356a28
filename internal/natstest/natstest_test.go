package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunAnswersRequests(t *testing.T) {
	s := Run(t)
	if !s.JetStreamEnabled() {
		t.Fatalf("JetStream is not enabled")
	}
	if got := s.Addr().String(); got[:10] != "127.0.0.1:" {
		t.Fatalf("server bound to %s, want 127.0.0.1", got)
	}
	nc := Connect(t, s)
	sub, err := nc.Subscribe("natstest.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	reply, err := nc.Request("natstest.echo", []byte("ping"), 5*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if string(reply.Data) != "ping" {
		t.Fatalf("reply %q, want ping", reply.Data)
	}
}
