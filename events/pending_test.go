package events

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/egresslog"
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
	w.Removal = egresslog.RemovalRemoved
	sink.EgressDrained(ctx, w)
	waitFor(t, "the pending record forgotten", func() bool { return len(pendingIDs()) == 0 })
	if inStream() != 1 {
		t.Fatalf("%d events, want 1", inStream())
	}

	// Two engines died: one after its proxy's removal (gone), one before it (still there); a
	// third died after publishing, before forgetting its record (gone, already in the stream).
	gone, kept, published := testWindow(), testWindow(), testWindow()
	gone.ProxyID, kept.ProxyID, published.ProxyID = strings.Repeat("a", 64), strings.Repeat("b", 64), w.ProxyID
	for _, p := range []egresslog.Window{gone, kept, published} {
		p.Removal = ""
		if err := store.Put(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	exists := map[string]bool{kept.ProxyID: true}
	var seen []egresslog.Window
	n, err := store.Recover(ctx, func(_ context.Context, id string) (bool, error) { return !exists[id], nil },
		func(ctx context.Context, w egresslog.Window) error {
			seen = append(seen, w)
			return box.EnqueueWindowWait(ctx, DefaultSubjectPrefix, "E", w)
		})
	if err != nil || n != 2 {
		t.Fatalf("recover: %d published, %v; want 2", n, err)
	}
	for _, w := range seen {
		if w.ProxyID == kept.ProxyID || w.Removal != egresslog.RemovalAbsent {
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
		func(context.Context, egresslog.Window) error { t.Fatal("published without a check"); return nil })
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
	w := egresslog.Window{ProxyID: strings.Repeat("ab", 32)}
	if err := a.Put(ctx, w); err != nil {
		t.Fatal(err)
	}
	everywhereGone := func(context.Context, string) (bool, error) { return true, nil }
	var published []string
	publish := func(_ context.Context, w egresslog.Window) error {
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
