package events

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// noDaemon is a daemon whose identity cannot be read.
type noDaemon struct{}

func (noDaemon) EngineID(context.Context) (string, error) { return "", errors.New("daemon away") }
func (noDaemon) Gone(context.Context, string) (bool, error) {
	return false, errors.New("daemon away")
}

func TestNewRefuses(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	cases := []struct {
		name string
		nc   *nats.Conn
		opts []Option
	}{
		{"nil connection", nil, nil},
		{"bad prefix", nc, []Option{WithPrefix("bad prefix")}},
		{"negative recovery period", nc, []Option{WithRecoveryEvery(-time.Second)}},
		{"bad stream option", nc, []Option{WithStreams(WithDuplicateWindow(0))}},
		{"bad outbox option", nc, []Option{WithOutbox(WithCapacity(0))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(t.Context(), tc.nc, tc.opts...); !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err %v, want ErrInvalidEvent", err)
			}
		})
	}
	// The pending records are the daemon's: without its identity there is nowhere to keep
	// them, so New fails; on core NATS there are none, and the events say "unknown".
	if _, err := New(t.Context(), nc, WithDaemon(noDaemon{})); err == nil {
		t.Fatal("New without the daemon's identity succeeded on JetStream")
	}
	ev, err := New(t.Context(), nc, WithDaemon(noDaemon{}), WithCoreNATS())
	if err != nil {
		t.Fatal(err)
	}
	if ev.EngineID() != "unknown" || ev.Pending() != nil {
		t.Fatalf("core events without the daemon's identity: engine %q, pending %v", ev.EngineID(), ev.Pending())
	}
	if err := ev.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The sinks New hands out: a host-tool call on core NATS with the event headers, a reap
// summary in the ops stream, delivered by Close.
func TestSinks(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	prefix := "maf.unit.sinks"
	ev, err := New(ctx, nc, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Pending() != nil || ev.Prefix() != prefix {
		t.Fatalf("events without a daemon: pending %v, prefix %q", ev.Pending(), ev.Prefix())
	}
	calls := make(chan *nats.Msg, 1)
	subConn := natstest.Connect(t, srv)
	sub, err := subConn.ChanSubscribe(prefix+".host_tools.called.>", calls)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	ev.HostTools().HostToolCalled(HostToolCalledEvent{Key: messages.APIKey{Scope: "tenant-1"}, Kind: "codeact", Tool: "search", Call: 1})
	select {
	case m := <-calls:
		if m.Subject != prefix+".host_tools.called.tenant-1.codeact" || m.Header.Get(HeaderEventType) != TypeHostToolCalled ||
			m.Header.Get(HeaderMsgID) == "" || m.Header.Get(HeaderContentType) != "application/json" {
			t.Fatalf("host-tool event %s %v %s", m.Subject, m.Header, m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no host-tool event")
	}
	now := time.Now()
	m, err := ev.Reaps().Publish(ctx, sandbox.ReapResult{OlderThan: time.Hour, StartedAt: now, FinishedAt: now, Cutoff: now.Add(-time.Hour)})
	if err != nil || m.Subject != prefix+".reap.completed" {
		t.Fatalf("reap summary %+v: %v", m, err)
	}
	if err := ev.Close(ctx); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, StreamOps)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("ops stream: %+v, %v; want the one summary", info, err)
	}
}

// Close gives up at its context with what NATS never took, and says so.
func TestCloseReportsUndelivered(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	ev, err := New(t.Context(), nc, WithCoreNATS(), WithOutbox(WithBackoff(time.Millisecond, 10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	now := time.Now()
	if _, err := ev.Reaps().Publish(t.Context(), sandbox.ReapResult{OlderThan: time.Hour, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err) // kept: NATS being away is no refusal
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := ev.Close(ctx); !errors.Is(err, ErrUndelivered) {
		t.Fatalf("Close with NATS away: %v, want ErrUndelivered", err)
	}
	if err := ev.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}
