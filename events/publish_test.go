package events

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// A subscriber receives exactly one event per window, with the headers and fields of §3.7;
// a repeat with the same ID is acknowledged and dropped by the stream.
func TestJetStreamPublishOneEventPerWindow(t *testing.T) {
	s := runNATS(t, -1, t.TempDir())
	nc := connect(t, s.ClientURL())
	pub, err := NewJetStreamPublisher(nc, WithDuplicateWindow(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub, err := nc.SubscribeSync(DefaultSubjectPrefix + ".egress.observed." + Token("tenant-1") + ".>")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := EgressEvent(testWindow(), "E", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := EgressMessage(DefaultSubjectPrefix, ev)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // overlapping drainers publish the same window
		if err := pub.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	msgs := streamMessages(t, nc, StreamEgress)
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d events, want 1", len(msgs))
	}
	h := msgs[0].Headers()
	if h.Get(HeaderMsgID) != "egw_"+testProxyID || h.Get(HeaderEventType) != "egress.observed.v2" || h.Get(HeaderContentType) != "application/json" {
		t.Fatalf("headers %v", h)
	}
	var got EgressObservedEvent
	if err := json.Unmarshal(msgs[0].Data(), &got); err != nil {
		t.Fatal(err)
	}
	if got.EventID != ev.EventID || got.Key.Scope != "tenant-1" || len(got.Decisions) != 3 || got.Decisions[1].Host != "evil.example" {
		t.Fatalf("event %+v", got)
	}
	// The core subscription saw the publications themselves (core NATS does not de-duplicate:
	// subscribers that do not read the stream de-duplicate on eventId).
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A second window (another proxy container) is another event.
	w2 := testWindow()
	w2.ProxyID = strings.Repeat("b", 64)
	ev2, _ := EgressEvent(w2, "E", time.Now())
	m2, _ := EgressMessage(DefaultSubjectPrefix, ev2)
	if err := pub.Publish(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if n := len(streamMessages(t, nc, StreamEgress)); n != 2 {
		t.Fatalf("stream holds %d events, want 2", n)
	}
	// Reap summaries go to their own stream.
	rev, _ := ReapEvent(sandbox.ReapResult{OlderThan: time.Hour}, "run-00000001", "E", time.Now())
	rm, _ := ReapMessage(DefaultSubjectPrefix, rev)
	if err := pub.Publish(ctx, rm); err != nil {
		t.Fatal(err)
	}
	if n := len(streamMessages(t, nc, StreamOps)); n != 1 {
		t.Fatalf("ops stream holds %d, want 1", n)
	}
}

func TestCorePublish(t *testing.T) {
	s := runNATS(t, -1, t.TempDir())
	nc := connect(t, s.ClientURL())
	sub, err := nc.SubscribeSync(SubjectEgressObserved)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := EgressEvent(testWindow(), "E", time.Now())
	m, _ := EgressMessage(DefaultSubjectPrefix, ev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := NewCorePublisher(nc).Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Get(HeaderMsgID) != m.ID || string(got.Data) != string(m.Data) {
		t.Fatalf("got %v %s", got.Header, got.Data)
	}
	nc.Close()
	if err := NewCorePublisher(nc).Publish(ctx, m); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("closed connection: %v", err)
	}
}

// A refusal of the event or of an option is egresslog's ErrInvalidEvent, and every error this
// package makes says where it came from.
func TestRefusalsMatchInvalidEvent(t *testing.T) {
	nc := connect(t, runNATS(t, -1, t.TempDir()).ClientURL())
	pubOpts := map[string]JetStreamOpt{
		"prefix":           WithSubjectPrefix("bad prefix"),
		"max age":          WithEgressMaxAge(0),
		"duplicate window": WithDuplicateWindow(-time.Second),
	}
	for name, opt := range pubOpts {
		if _, err := NewJetStreamPublisher(nc, opt); !errors.Is(err, ErrInvalidEvent) || !strings.HasPrefix(err.Error(), "events: ") {
			t.Errorf("publisher option %s: %v", name, err)
		}
	}
	boxOpts := map[string]OutboxOpt{
		"capacity":        WithCapacity(0),
		"attempt timeout": WithAttemptTimeout(0),
		"backoff":         WithBackoff(time.Second, time.Millisecond),
	}
	for name, opt := range boxOpts {
		if _, err := NewOutbox(NewCorePublisher(nc), opt); !errors.Is(err, ErrInvalidEvent) || !strings.HasPrefix(err.Error(), "events: ") {
			t.Errorf("outbox option %s: %v", name, err)
		}
	}
	if _, err := NewOutbox(nil); !errors.Is(err, ErrInvalidEvent) || !strings.HasPrefix(err.Error(), "events: ") {
		t.Errorf("nil publisher: %v", err)
	}
	for _, err := range []error{ErrNotConnected, ErrOutboxFull, ErrOutboxClosed} {
		if !strings.HasPrefix(err.Error(), "events: ") {
			t.Errorf("%q does not say events", err)
		}
	}
}
