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
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/sandbox"
)

// fakePublisher fails while down is set and records what it accepted.
type fakePublisher struct {
	mu       sync.Mutex
	down     bool
	err      error
	accepted []string
}

func (p *fakePublisher) Publish(ctx context.Context, m Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		if p.err != nil {
			return p.err
		}
		return ErrNotConnected
	}
	p.accepted = append(p.accepted, m.ID)
	return nil
}

func (p *fakePublisher) set(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *fakePublisher) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.accepted...)
}

func msg(i int) Message {
	return Message{Subject: "maf.sandbox.docker.egress.observed.s.k", ID: fmt.Sprintf("egw_%064d", i), Type: TypeEgressObserved, Data: []byte("{}")}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutboxDeliversInOrderAfterOutage(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := &fakePublisher{down: true}
	b, err := NewOutbox(p, WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := b.Enqueue(msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "retries", func() bool { return b.Stats().Attempts >= 3 })
	if st := b.Stats(); st.Pending != 5 || st.Delivered != 0 {
		t.Fatalf("stats during the outage %+v", st)
	}
	p.set(false)
	waitFor(t, "delivery", func() bool { return b.Stats().Delivered == 5 })
	got := p.got()
	for i := range 5 {
		if got[i] != msg(i).ID {
			t.Fatalf("order %v", got)
		}
	}
	if n := b.Close(context.Background()); n != 0 {
		t.Fatalf("undelivered %d", n)
	}
	if err := b.Enqueue(msg(9)); !errors.Is(err, ErrOutboxClosed) {
		t.Fatalf("after close: %v", err)
	}
}

// A full outbox refuses loudly: an Error line and a counter, never a silent drop.
func TestOutboxFullIsLoud(t *testing.T) {
	defer goleak.VerifyNone(t)
	core, logs := observer.New(zapcore.DebugLevel)
	p := &fakePublisher{down: true}
	b, err := NewOutbox(p, WithCapacity(2), WithBackoff(time.Millisecond, 5*time.Millisecond), WithOutboxLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Enqueue(msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Enqueue(msg(2)); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("third enqueue: %v, want ErrOutboxFull", err)
	}
	if st := b.Stats(); st.Refused != 1 || st.Pending != 2 {
		t.Fatalf("stats %+v", st)
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("outbox full").All()
	if len(errs) != 1 || errs[0].ContextMap()["event_id"] != msg(2).ID {
		t.Fatalf("error logs %+v", logs.All())
	}
	// Closing with NATS still down reports each held event at Error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if n := b.Close(ctx); n != 2 {
		t.Fatalf("undelivered %d, want 2", n)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("undelivered").Len(); n != 2 {
		t.Fatalf("%d undelivered error lines, want 2", n)
	}
}

func TestOutboxPermanentRefusalIsLoud(t *testing.T) {
	defer goleak.VerifyNone(t)
	core, logs := observer.New(zapcore.DebugLevel)
	p := &fakePublisher{down: true, err: fmt.Errorf("publish: %w", nats.ErrMaxPayload)}
	b, err := NewOutbox(p, WithOutboxLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Enqueue(msg(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refusal", func() bool { return b.Stats().Failed == 1 })
	if st := b.Stats(); st.Pending != 0 || st.Attempts != 1 {
		t.Fatalf("stats %+v", st)
	}
	if logs.FilterLevelExact(zapcore.ErrorLevel).Len() != 1 {
		t.Fatalf("logs %+v", logs.All())
	}
	b.Close(context.Background())
}

// NATS stopped → the event is kept → delivered, once, after NATS restarts on the same port
// and store.
func TestOutboxSurvivesNATSRestart(t *testing.T) {
	dir := t.TempDir()
	s := runNATS(t, -1, dir)
	port := s.Addr().(*net.TCPAddr).Port
	nc := connect(t, s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	pub, err := NewJetStreamPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := NewOutbox(pub, WithBackoff(20*time.Millisecond, 200*time.Millisecond), WithAttemptTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	s.Shutdown()
	s.WaitForShutdown()
	waitFor(t, "the client to notice", func() bool { return !nc.IsConnected() })

	ev, err := EgressEvent(testWindow(), "E", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := EgressMessage(DefaultSubjectPrefix, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Enqueue(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "failed attempts", func() bool { return b.Stats().Attempts >= 2 })
	if st := b.Stats(); st.Delivered != 0 || st.Pending != 1 {
		t.Fatalf("stats while NATS is down %+v", st)
	}

	runNATS(t, port, dir)
	waitFor(t, "delivery after the restart", func() bool { return b.Stats().Delivered == 1 })
	msgs := streamMessages(t, nc, StreamEgress)
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d events, want 1", len(msgs))
	}
	var got EgressObservedEvent
	if err := json.Unmarshal(msgs[0].Data(), &got); err != nil || got.EventID != ev.EventID {
		t.Fatalf("event %+v %v", got, err)
	}
}

func TestOutboxEnqueueWindow(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := &fakePublisher{}
	b, err := NewOutbox(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.EnqueueWindow(DefaultSubjectPrefix, "E", testWindow()); err != nil {
		t.Fatal(err)
	}
	empty := testWindow()
	empty.Decisions = nil
	if err := b.EnqueueWindow(DefaultSubjectPrefix, "E", empty); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("empty window: %v", err)
	}
	b.Close(context.Background())
	if got := p.got(); len(got) != 1 || got[0] != "egw_"+testProxyID {
		t.Fatalf("published %v", got)
	}
}

func TestWindowSink(t *testing.T) {
	defer goleak.VerifyNone(t)
	core, logs := observer.New(zapcore.InfoLevel)
	p := &fakePublisher{}
	b, err := NewOutbox(p, WithOutboxLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	sink := b.WindowSink(DefaultSubjectPrefix, "E")
	sink.EgressObserved(context.Background(), testWindow())
	empty := testWindow()
	empty.Decisions = nil
	sink.EgressObserved(context.Background(), empty) // nothing to publish: said, not sent
	b.Close(context.Background())
	if got := p.got(); len(got) != 1 || got[0] != "egw_"+testProxyID {
		t.Fatalf("published %v", got)
	}
	if n := logs.FilterMessage("egress window not published").Len(); n != 1 {
		t.Fatalf("%d error lines for the unpublishable window, want 1", n)
	}
}

// EnqueueWindowWait returns once the publisher accepted the window; while the publisher is
// down it gives up at its context's end with the window still held, which the outbox then
// delivers once; Close tells a waiter its window was not delivered.
func TestEnqueueWindowWaitWaitsForTheAck(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := &fakePublisher{}
	b, err := NewOutbox(p, WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w := testWindow()
	if err := b.EnqueueWindowWait(context.Background(), DefaultSubjectPrefix, "E", w); err != nil {
		t.Fatalf("wait with the publisher up: %v", err)
	}
	if got := p.got(); len(got) != 1 {
		t.Fatalf("accepted %v when the wait returned", got)
	}
	p.set(true)
	w.ProxyID = "3f9c000000000000000000000000000000000000000000000000000000000002"
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := b.EnqueueWindowWait(short, DefaultSubjectPrefix, "E", w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with the publisher down: %v, want the wait's deadline", err)
	}
	if st := b.Stats(); st.Pending != 1 {
		t.Fatalf("after a wait that timed out: %+v, want the window held", st)
	}
	p.set(false)
	waitFor(t, "the held window", func() bool { return b.Stats().Delivered == 2 })

	p.set(true)
	done := make(chan error, 1)
	go func() { done <- b.EnqueueWait(context.Background(), msg(7)) }()
	waitFor(t, "an attempt", func() bool { return b.Stats().Attempts >= 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	b.Close(ctx)
	if err := <-done; !errors.Is(err, ErrOutboxClosed) {
		t.Fatalf("waiter at close: %v", err)
	}
}

// A stream at its limits that discards new messages refuses the audit events: the outbox
// holds them, says so at Error once, counts the refusals and reports them held as blocked;
// once the operator raises the limit they land, in order, and the block is over.
func TestOutboxHeldByAFullStream(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	core, logs := observer.New(zapcore.DebugLevel)
	ev, err := New(t.Context(), nc, WithLogger(zap.New(core)), WithOutbox(WithBackoff(5*time.Millisecond, 20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(t.Context()) })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	limit := func(maxMsgs int64) {
		t.Helper()
		st, err := js.Stream(t.Context(), StreamAudit)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.MaxMsgs, cfg.Discard = maxMsgs, jetstream.DiscardNew
		if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	limit(2) // an operator's tiny limit, discarding new messages
	for i := range 5 {
		ev.Audit().Record(AuditEvent{Type: AuditExecFinished, RequestID: fmt.Sprintf("req-%d", i), Outcome: sandbox.OutcomeOK})
	}
	waitFor(t, "the stream's refusal counted", func() bool { st := ev.AuditStats(); return st.Delivered == 2 && st.StreamRefusals >= 2 })
	st, all := ev.AuditStats(), ev.Stats()
	if st.Pending != 3 || st.Blocked != 3 || all.Blocked != 3 || all.StreamRefusals != st.StreamRefusals || st.Failed != 0 {
		t.Fatalf("with the stream full: audit %+v, all %+v; want 3 held and blocked, none failed", st, all)
	}
	loud := logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("the stream refuses to store events").All()
	if len(loud) != 1 || loud[0].ContextMap()["held"] != int64(3) {
		t.Fatalf("error lines about the full stream: %+v, want one naming 3 held", loud)
	}

	limit(-1) // the operator lifts it
	waitFor(t, "the held events delivered", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == 5 })
	if st := ev.AuditStats(); st.Blocked != 0 {
		t.Fatalf("after the limit is lifted: %+v, want nothing blocked", st)
	}
	if n := logs.FilterMessageSnippet("the stream takes events again").Len(); n != 1 {
		t.Fatalf("%d lines saying the stream takes events again, want 1", n)
	}
	msgs := streamMessages(t, nc, StreamAudit)
	if len(msgs) != 5 {
		t.Fatalf("the stream holds %d events, want 5", len(msgs))
	}
	for i, m := range msgs {
		var a AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil || a.RequestID != fmt.Sprintf("req-%d", i) {
			t.Errorf("event %d: %s (%v), want req-%d's", i, m.Data(), err, i)
		}
	}
}

// An event larger than its stream's max_msg_size is refused for good: counted failed and
// logged, and the events behind it are delivered instead of waiting behind it for ever.
func TestOutboxEventOverTheStreamsMaxSize(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc := connect(t, srv.ClientURL())
	ev, err := New(t.Context(), nc, WithOutbox(WithBackoff(5*time.Millisecond, 20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(t.Context()) })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 1024
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	ev.Audit().Record(AuditEvent{Type: AuditFileWritten, Outcome: sandbox.OutcomeOK, File: &AuditFile{Direction: "in", Path: strings.Repeat("p", 2048)}})
	ev.Audit().Record(AuditEvent{Type: AuditExecFinished, Outcome: sandbox.OutcomeOK})
	waitFor(t, "the small event delivered past the large one", func() bool { st := ev.AuditStats(); return st.Pending == 0 && st.Delivered == 1 })
	if st := ev.AuditStats(); st.Failed != 1 || st.Blocked != 0 {
		t.Fatalf("stats %+v, want the large event failed, nothing blocked", st)
	}
}
