package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

func TestAuditMessage(t *testing.T) {
	ev := AuditEvent{ID: "aud_1", Type: AuditFileRefused, Key: &messages.APIKey{Scope: "tenant 1", ThreadID: "t"}, Kind: "python",
		Outcome: sandbox.OutcomeRefused, Error: "not_confined", File: &AuditFile{Direction: "in", Path: "../x"}}
	m, err := AuditMessage("maf.sandbox.docker", ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := "maf.sandbox.docker.audit." + Token("tenant 1") + ".python.file.refused"; m.Subject != want {
		t.Errorf("subject %q, want %q", m.Subject, want)
	}
	if m.ID != "aud_1" || m.Type != "audit.file.refused.v2" {
		t.Errorf("message ID %q type %q", m.ID, m.Type)
	}
	engine, err := AuditMessage("p", AuditEvent{ID: "aud_2", Type: AuditEngineStarted})
	if err != nil || engine.Subject != "p.audit._._.engine.started" {
		t.Errorf("an engine event's subject %q (%v), want p.audit._._.engine.started", engine.Subject, err)
	}
	for _, bad := range []AuditEvent{{Type: AuditExecFinished}, {ID: "x"}} {
		if _, err := AuditMessage("p", bad); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("AuditMessage(%+v) = %v, want ErrInvalidEvent", bad, err)
		}
	}
	if _, err := AuditMessage("p.>", ev); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("a wildcard prefix: %v, want ErrInvalidEvent", err)
	}
}

// An audit ID is bound to the engine, the caller's account and the act: change any and it
// changes; the same three give the same ID (what the outbox's retries rely on).
func TestAuditID(t *testing.T) {
	a := AuditID("e", "tenant-a", "act-1")
	if a != AuditID("e", "tenant-a", "act-1") || !strings.HasPrefix(a, "aud_") || len(a) != 44 {
		t.Fatalf("AuditID %q: want aud_ and 40 hex digits, the same for the same inputs", a)
	}
	for _, other := range []string{AuditID("f", "tenant-a", "act-1"), AuditID("e", "tenant-b", "act-1"), AuditID("e", "tenant-a", "act-2"),
		AuditID("e", "tenant-a\x00act", "-1")} {
		if other == a {
			t.Fatalf("two acts share the ID %s", a)
		}
	}
}

// Record gives every event an ID of its own, even two events alike in every field a caller
// sets (the request ID included), and keeps an ID already set.
func TestAuditRecordMintsOneIDPerAct(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	ev, err := New(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(t.Context()) })
	same := AuditEvent{Type: AuditExecFinished, RequestID: "turn-1", Sandbox: "h1", Account: "tenant-a", Outcome: sandbox.OutcomeOK}
	ev.Audit().Record(same)
	ev.Audit().Record(same)
	set := same
	set.ID = "aud_given"
	ev.Audit().Record(set)
	waitFor(t, "three events delivered", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == 3 })
	msgs := streamMessages(t, nc, StreamAudit)
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[m.Headers().Get(HeaderMsgID)] = true
	}
	if len(msgs) != 3 || len(ids) != 3 || !ids["aud_given"] {
		t.Fatalf("the stream holds %d events with IDs %v, want 3 distinct, aud_given among them", len(msgs), ids)
	}
}

// lostAck publishes through pub but answers the first attempt of each message with an error,
// as a publish whose acknowledgement was lost on the way back: the stream has it, the outbox
// does not know and publishes it again.
type lostAck struct {
	pub  Publisher
	mu   sync.Mutex
	seen map[string]bool
}

func (l *lostAck) Publish(ctx context.Context, m Message) error {
	if err := l.pub.Publish(ctx, m); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.seen[m.ID] {
		l.seen[m.ID] = true
		return fmt.Errorf("%w: the acknowledgement was lost", ErrNotConnected)
	}
	return nil
}

// The outbox's retry of an audit event is the same event: it keeps its ID, so the stream's
// duplicate window keeps one copy of each act even when every first acknowledgement is lost.
func TestAuditRetryKeepsTheID(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	js, err := NewJetStreamPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	box, err := NewOutbox(&lostAck{pub: js, seen: map[string]bool{}}, WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close(context.Background()) })
	sink := &AuditSink{box: box, prefix: DefaultSubjectPrefix, engineID: "e", log: zap.NewNop()}
	for range 3 {
		sink.Record(AuditEvent{Type: AuditExecFinished, RequestID: "turn-1", Sandbox: "h1", Outcome: sandbox.OutcomeOK})
	}
	waitFor(t, "three events delivered", func() bool { st := box.Stats(); return st.Pending == 0 && st.Delivered == 3 })
	if st := box.Stats(); st.Attempts != 6 {
		t.Fatalf("%d attempts, want 6: each event published twice", st.Attempts)
	}
	if msgs := streamMessages(t, nc, StreamAudit); len(msgs) != 3 {
		t.Fatalf("the stream holds %d events, want 3: a retry was stored as another act", len(msgs))
	}
}

func TestNilAuditSinkRecordsNothing(t *testing.T) {
	var s *AuditSink
	s.Record(AuditEvent{Type: AuditEngineStarted}) // must not panic
}

// The audit stream while NATS is away: every call's event is kept (up to the audit outbox's
// capacity), nothing blocks, the overflow is refused and counted, and once the server is back
// the kept events land in the stream in order, each once.
func TestAuditOutlivesANATSOutage(t *testing.T) {
	dir := t.TempDir()
	srv := runNATS(t, -1, dir)
	url, port := srv.ClientURL(), srv.Addr().(*net.TCPAddr).Port
	nc := connect(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	const capacity = 8
	ev, err := New(t.Context(), nc, WithOutbox(WithBackoff(20*time.Millisecond, 100*time.Millisecond)),
		WithAuditOutbox(WithCapacity(capacity)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(t.Context()) })
	audit := ev.Audit()
	record := func(i int) {
		audit.Record(AuditEvent{Type: AuditExecFinished, RequestID: fmt.Sprintf("req-%02d", i), Sandbox: "h1", Kind: "python",
			Key: &messages.APIKey{Scope: "tenant-1"}, Outcome: sandbox.OutcomeOK, Exec: &AuditExec{Form: "argv", Argv0: "true"}})
	}
	record(0)
	waitFor(t, "the first event delivered", func() bool { return ev.AuditStats().Delivered == 1 })

	srv.Shutdown()
	srv.WaitForShutdown()
	start := time.Now()
	for i := 1; i <= capacity+4; i++ {
		record(i)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("recording %d events with NATS away took %s: recording must not wait for NATS", capacity+4, d)
	}
	st := ev.AuditStats()
	if st.Pending != capacity || st.Refused != 4 {
		t.Fatalf("with NATS away: %+v, want %d held and 4 refused", st, capacity)
	}

	runNATS(t, port, dir)
	waitFor(t, "the held events delivered", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == capacity+1 })
	msgs := streamMessages(t, connect(t, url), StreamAudit)
	if len(msgs) != capacity+1 {
		t.Fatalf("the audit stream holds %d events, want %d", len(msgs), capacity+1)
	}
	seen := map[string]bool{}
	for i, m := range msgs {
		var got AuditEvent
		if err := json.Unmarshal(m.Data(), &got); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("req-%02d", i); got.RequestID != want {
			t.Errorf("event %d is %s's, want %s's: the kept events must arrive in order", i, got.RequestID, want)
		}
		if seen[got.ID] || m.Headers().Get(HeaderMsgID) != got.ID || got.Schema != SchemaAudit {
			t.Errorf("event %d: ID %s (header %s), schema %s", i, got.ID, m.Headers().Get(HeaderMsgID), got.Schema)
		}
		seen[got.ID] = true
		if !strings.HasPrefix(m.Subject(), DefaultSubjectPrefix+".audit.tenant-1.python.exec.finished") {
			t.Errorf("subject %s", m.Subject())
		}
	}
}
