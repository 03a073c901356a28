package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestAuditMessage(t *testing.T) {
	ev := AuditEvent{ID: "aud_1", Type: AuditFileRefused, Key: &EventKey{Scope: "tenant 1", ThreadID: "t"}, Kind: "python",
		Outcome: OutcomeRefused, Error: "not_confined", File: &AuditFile{Direction: "in", Path: "../x"}}
	m, err := AuditMessage("maf.sandbox.docker", ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := "maf.sandbox.docker.audit." + Token("tenant 1") + ".python.file.refused"; m.Subject != want {
		t.Errorf("subject %q, want %q", m.Subject, want)
	}
	if m.ID != "aud_1" || m.Type != "audit.file.refused.v1" {
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

// A retried request (same request ID) keeps its event's ID; another request, type or sandbox
// changes it; no request ID gets a fresh one each time.
func TestAuditID(t *testing.T) {
	a := AuditID("e", "req-1", AuditExecFinished, "h1")
	if a != AuditID("e", "req-1", AuditExecFinished, "h1") {
		t.Fatal("the same call's ID changed")
	}
	for _, other := range []string{AuditID("e", "req-2", AuditExecFinished, "h1"), AuditID("e", "req-1", AuditFileRead, "h1"),
		AuditID("e", "req-1", AuditExecFinished, "h2"), AuditID("f", "req-1", AuditExecFinished, "h1")} {
		if other == a {
			t.Fatalf("two acts share the ID %s", a)
		}
	}
	first, second := AuditID("e", "", AuditEngineStarted, ""), AuditID("e", "", AuditEngineStarted, "")
	if first == second {
		t.Fatal("two acts without a request ID share an ID")
	}
}

func TestCommandSHA256(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	if got := CommandSHA256([]string{"echo", "a b"}, ""); got != sum(`["echo","a b"]`) {
		t.Errorf("argv digest %s", got)
	}
	if got := CommandSHA256(nil, "echo a b"); got != sum("echo a b") {
		t.Errorf("shell digest %s", got)
	}
	// argv ["echo a", "b"] and ["echo", "a b"] are different commands.
	if CommandSHA256([]string{"echo a", "b"}, "") == CommandSHA256([]string{"echo", "a b"}, "") {
		t.Error("two argvs that join alike share a digest")
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
			Key: &EventKey{Scope: "tenant-1"}, Outcome: OutcomeOK, Exec: &AuditExec{Form: "argv", Argv0: "true"}})
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
