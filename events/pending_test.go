package events

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/sandbox"
)

// A window recorded as pending is a KV entry, not an event: nothing is on the stream until the
// sink is handed it after the removal, and the entry goes once the stream acknowledged it.
// Recovery publishes an entry only once its proxy is absent (as "absent", under the drainer's
// event ID, so a repeat is dropped), leaves one whose proxy exists, and forgets what it
// published.
func TestPendingRecordAndRecovery(t *testing.T) {
	s := runNATS(t, -1, t.TempDir())
	nc := connect(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub, err := NewJetStreamPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	box, err := NewOutbox(pub, WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close(ctx)
	store, err := NewPendingStore(nc, DefaultSubjectPrefix)
	if err != nil {
		t.Fatal(err)
	}
	sink := box.WindowSink(DefaultSubjectPrefix, "E").WithPending(store)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	inStream := func() uint64 {
		st, err := js.Stream(ctx, StreamEgress)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	pendingIDs := func() []string {
		ws, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, w := range ws {
			ids = append(ids, w.ProxyID)
		}
		return ids
	}

	// The whole path of one window: pending before the removal, the event after, the entry gone.
	w := testWindow()
	w.Removal = ""
	sink.EgressPending(ctx, w)
	if got := pendingIDs(); len(got) != 1 || got[0] != w.ProxyID || inStream() != 0 {
		t.Fatalf("after the pending record: pending %v, %d events; want the one record and no event", got, inStream())
	}
	w.Removal = sandbox.RemovalRemoved
	sink.EgressObserved(ctx, w)
	waitFor(t, "the pending record forgotten", func() bool { return len(pendingIDs()) == 0 })
	if inStream() != 1 {
		t.Fatalf("%d events, want 1", inStream())
	}

	// Two engines died: one after its proxy's removal (gone), one before it (still there); a
	// third died after publishing, before forgetting its record (gone, already in the stream).
	gone, kept, published := testWindow(), testWindow(), testWindow()
	gone.ProxyID, kept.ProxyID, published.ProxyID = strings.Repeat("a", 64), strings.Repeat("b", 64), w.ProxyID
	for _, p := range []sandbox.EgressWindow{gone, kept, published} {
		p.Removal = ""
		if err := store.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	exists := map[string]bool{kept.ProxyID: true}
	var seen []sandbox.EgressWindow
	n, err := store.Recover(ctx, func(_ context.Context, id string) (bool, error) { return !exists[id], nil },
		func(ctx context.Context, w sandbox.EgressWindow) error {
			seen = append(seen, w)
			return box.EnqueueWindowWait(ctx, DefaultSubjectPrefix, "E", w)
		})
	if err != nil || n != 2 {
		t.Fatalf("recover: %d published, %v; want 2", n, err)
	}
	for _, w := range seen {
		if w.ProxyID == kept.ProxyID || w.Removal != sandbox.RemovalAbsent {
			t.Fatalf("recovery published %s as %q", w.ProxyID, w.Removal)
		}
	}
	if got := pendingIDs(); len(got) != 1 || got[0] != kept.ProxyID {
		t.Fatalf("pending after the recovery: %v, want only the surviving proxy's", got)
	}
	if inStream() != 2 {
		t.Fatalf("%d events, want 2 (the repeat dropped)", inStream())
	}

	// A failed check leaves the record for the next pass.
	_, err = store.Recover(ctx, func(context.Context, string) (bool, error) { return false, errors.New("daemon away") },
		func(context.Context, sandbox.EgressWindow) error { t.Fatal("published without a check"); return nil })
	if err == nil || len(pendingIDs()) != 1 {
		t.Fatalf("recover with the daemon away: %v, pending %v", err, pendingIDs())
	}
}

// Engines of several hosts share the bucket, and a proxy absent from one daemon may exist on
// another's: a store scoped to a daemon lists and recovers only that daemon's records, so no
// engine ever publishes a window whose proxy it cannot see.
func TestPendingRecoveryIsTheDaemonsOwn(t *testing.T) {
	s := runNATS(t, -1, t.TempDir())
	nc := connect(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := NewPendingStore(nc, DefaultSubjectPrefix, WithPendingDaemon("AAAA:BBBB"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPendingStore(nc, DefaultSubjectPrefix, WithPendingDaemon("CCCC:DDDD"))
	if err != nil {
		t.Fatal(err)
	}
	w := sandbox.EgressWindow{ProxyID: strings.Repeat("ab", 32)}
	if err := a.Put(ctx, w); err != nil {
		t.Fatal(err)
	}
	everywhereGone := func(context.Context, string) (bool, error) { return true, nil }
	var published []string
	publish := func(_ context.Context, w sandbox.EgressWindow) error {
		published = append(published, w.ProxyID)
		return nil
	}
	if n, err := b.Recover(ctx, everywhereGone, publish); err != nil || n != 0 || len(published) != 0 {
		t.Fatalf("another daemon's recovery published %d (%v), %v; want nothing", n, published, err)
	}
	if ws, err := b.List(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("another daemon lists %v, %v; want none", ws, err)
	}
	if n, err := a.Recover(ctx, everywhereGone, publish); err != nil || n != 1 || len(published) != 1 || published[0] != w.ProxyID {
		t.Fatalf("its own daemon's recovery published %d (%v), %v; want the one window", n, published, err)
	}
	if ws, err := a.List(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("after the recovery %v, %v; want it forgotten", ws, err)
	}
}

// awayStore is a pending store on a connection whose server is gone (the client reconnecting,
// so every bucket call waits out its context), and a function that reports once the
// connection has handed the server at least n more messages than at the start.
func awayStore(t *testing.T, opts ...PendingOption) (*PendingStore, func(n uint64) bool) {
	t.Helper()
	s := runNATS(t, -1, t.TempDir())
	nc := connect(t, s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour))
	store, err := NewPendingStore(nc, DefaultSubjectPrefix, opts...)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	waitFor(t, "the client to see the server gone", func() bool { return !nc.IsConnected() })
	base := nc.Stats().OutMsgs
	return store, func(n uint64) bool { return nc.Stats().OutMsgs >= base+n }
}

// While NATS is away, a record whose write waits for the bucket does not hold another back:
// each proxy's removal waits its own bounded time, never one queued behind another's.
func TestPendingRecordsDoNotQueueBehindEachOther(t *testing.T) {
	store, sent := awayStore(t)
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() { firstDone <- store.Put(first, sandbox.EgressWindow{ProxyID: strings.Repeat("a", 64)}) }()
	waitFor(t, "the first record's call to the bucket", func() bool { return sent(1) })

	second, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	secondDone := make(chan error, 1)
	go func() { secondDone <- store.Put(second, sandbox.EgressWindow{ProxyID: strings.Repeat("b", 64)}) }()
	select {
	case err := <-secondDone:
		if err == nil {
			t.Fatal("a record was written with NATS away")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second record waited behind the first one's call to the bucket")
	}
	select {
	case err := <-firstDone:
		t.Fatalf("the second record's call returned only once the first one's had ended (%v): it waited behind it", err)
	default:
	}
	cancelFirst()
	if err := <-firstDone; err == nil {
		t.Fatal("the first record was written with NATS away")
	}
}

// The outbox's worker only hands a delivered window's record to the store's worker: while the
// bucket cannot be reached, the next windows are still published at once, not each after the
// last one's forgetting has waited its time out.
func TestPendingForgetDoesNotHoldTheOutbox(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	store, sent := awayStore(t, WithPendingLogger(zap.New(core)))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		store.Close(ctx) // the records' deletions end with the connection
	}()
	forgetFailures := func() int { return logs.FilterMessageSnippet("not forgotten").Len() }
	var mu sync.Mutex
	var failuresAtPublish []int
	pub := publisherFunc(func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		failuresAtPublish = append(failuresAtPublish, forgetFailures())
		return nil
	})
	box, err := NewOutbox(pub, WithOutboxLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close(context.Background())
	sink := box.WindowSink(DefaultSubjectPrefix, "E").WithPending(store)
	published := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(failuresAtPublish)
	}

	w := testWindow()
	sink.EgressObserved(context.Background(), w)
	waitFor(t, "the first window published and its record's forgetting under way", func() bool { return published() == 1 && sent(1) })
	w.ProxyID = strings.Repeat("c", 64)
	sink.EgressObserved(context.Background(), w)
	waitFor(t, "the second window published", func() bool { return published() == 2 })
	mu.Lock()
	defer mu.Unlock()
	if failuresAtPublish[1] != 0 {
		t.Fatalf("the second window was published only once the first one's record had failed to be forgotten (%d failures logged by then)", failuresAtPublish[1])
	}
}

// publisherFunc adapts a function to [Publisher].
type publisherFunc func(ctx context.Context, m Message) error

func (f publisherFunc) Publish(ctx context.Context, m Message) error { return f(ctx, m) }
