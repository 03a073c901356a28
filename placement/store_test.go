package placement_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// kvKey is what a JetStream KV key may be (nats.go's own check).
var kvKey = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

func TestEntryKeyIsAValidKVKeyAndRoundTrips(t *testing.T) {
	keys := []sandbox.Key{
		{},
		{Scope: "s", ThreadID: "t", AgentID: "a"},
		{Scope: "a.b", ThreadID: "", AgentID: "*", CallID: ">"},
		{Scope: "tenant/1", ThreadID: "conv 1", AgentID: "ägent\x00", CallID: "c..d"},
	}
	seen := map[string]bool{}
	for _, k := range keys {
		for _, kind := range []string{"", "python", "a.b"} {
			e := placement.EntryKey(k, kind)
			if !kvKey.MatchString(e) {
				t.Errorf("EntryKey(%+v, %q) = %q: not a KV key", k, kind, e)
			}
			if seen[e] {
				t.Errorf("EntryKey(%+v, %q) = %q collides", k, kind, e)
			}
			seen[e] = true
			gk, gkind, err := placement.ParseEntryKey(e)
			if err != nil || gk != k || gkind != kind {
				t.Errorf("ParseEntryKey(%q) = %+v, %q, %v; want %+v, %q", e, gk, gkind, err, k, kind)
			}
		}
	}
}

// TestClaimRaceHasOneOwnerPerKey: 50 workers claim 20 keys at once through 3 engines' stores;
// every key ends with exactly one owner, and every worker of a key was told the same one.
func TestClaimRaceHasOneOwnerPerKey(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	stores := []*placement.Store{store(t, url, "e1"), store(t, url, "e2"), store(t, url, "e3")}
	const workers, keys = 50, 20
	type answer struct{ key, owner string }
	answers := make(chan answer, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := stores[w%len(stores)]
			k := sandbox.Key{Scope: "race", ThreadID: fmt.Sprint(w % keys), AgentID: "a"}
			l, _, err := s.Claim(t.Context(), k, "python")
			var held *placement.HeldError
			switch {
			case err == nil:
				answers <- answer{fmt.Sprint(w % keys), l.Engine}
			case errors.As(err, &held):
				answers <- answer{fmt.Sprint(w % keys), held.Owner}
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(answers)
	owners := map[string]string{}
	for a := range answers {
		if o, ok := owners[a.key]; ok && o != a.owner {
			t.Errorf("key %s: told owner %s and %s", a.key, o, a.owner)
		}
		owners[a.key] = a.owner
	}
	if len(owners) != keys {
		t.Fatalf("%d keys have owners, want %d", len(owners), keys)
	}
	for i := range keys {
		k := sandbox.Key{Scope: "race", ThreadID: fmt.Sprint(i), AgentID: "a"}
		r, ok, err := stores[0].Get(t.Context(), k, "python")
		if err != nil || !ok || r.Engine != owners[fmt.Sprint(i)] {
			t.Errorf("key %d: bucket says %+v (%v, %v), workers were told %s", i, r, ok, err, owners[fmt.Sprint(i)])
		}
	}
}

// TestLapsedLeaseIsTakenOverAndTheOldOwnerFenced: a lease that is not renewed is taken over
// once it lapsed past the grace, and the old owner's renewal and release then fail.
func TestLapsedLeaseIsTakenOverAndTheOldOwnerFenced(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	opts := []placement.Option{placement.WithLease(300 * time.Millisecond), placement.WithGrace(100 * time.Millisecond)}
	a, b := store(t, url, "a", opts...), store(t, url, "b", opts...)
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}

	la, taken, err := a.Claim(t.Context(), k, "py")
	if err != nil || taken != nil {
		t.Fatalf("a claims: %v (taken %+v)", err, taken)
	}
	if _, _, err := b.Claim(t.Context(), k, "py"); !errors.Is(err, placement.ErrNotOwner) {
		t.Fatalf("b claims a live lease: %v, want a HeldError", err)
	}
	// Renewing keeps it: the old revision is replaced by a new one.
	la2, err := a.Renew(t.Context(), la)
	if err != nil || la2.Revision <= la.Revision {
		t.Fatalf("renew: %+v, %v", la2, err)
	}
	if _, err := a.Renew(t.Context(), la); !errors.As(err, new(*placement.LostError)) {
		t.Fatalf("renew on a stale revision: %v, want a LostError", err)
	}
	// Claiming again as the owner extends the same entry.
	la3, taken, err := a.Claim(t.Context(), k, "py")
	if err != nil || taken != nil || la3.Revision <= la2.Revision {
		t.Fatalf("owner re-claims: %+v, %+v, %v", la3, taken, err)
	}

	var lb placement.Lease
	eventually(t, "b takes the lapsed lease over", func() bool {
		if la3.Valid(time.Now()) {
			return false // the owner must see its lease lapse before any taker can take it
		}
		lb, taken, err = b.Claim(t.Context(), k, "py")
		return err == nil
	})
	if taken == nil || taken.Engine != "a" || taken.Revision != la3.Revision {
		t.Fatalf("takeover reports %+v, want a's record at revision %d", taken, la3.Revision)
	}
	if _, err := a.Renew(t.Context(), la3); !errors.Is(err, placement.ErrNotOwner) {
		t.Fatalf("the old owner renews after the takeover: %v, want a LostError", err)
	}
	if err := a.Release(t.Context(), la3); !errors.Is(err, placement.ErrNotOwner) {
		t.Fatalf("the old owner releases after the takeover: %v, want a LostError", err)
	}
	if r, ok, _ := a.Get(t.Context(), k, "py"); !ok || r.Engine != "b" || r.Revision != lb.Revision {
		t.Fatalf("entry after the takeover: %+v, %v; want b's at %d", r, ok, lb.Revision)
	}
}

// TestTakeoverRaceHasOneWinner: three engines take one lapsed lease over at once; one wins.
func TestTakeoverRaceHasOneWinner(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	opts := []placement.Option{placement.WithLease(200 * time.Millisecond), placement.WithGrace(0)}
	old := store(t, url, "old", opts...)
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}
	l, _, err := old.Claim(t.Context(), k, "py")
	if err != nil {
		t.Fatal(err)
	}
	takers := []*placement.Store{store(t, url, "t1", opts...), store(t, url, "t2", opts...), store(t, url, "t3", opts...)}
	for l.Valid(time.Now()) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for _, s := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, taken, err := s.Claim(t.Context(), k, "py")
			switch {
			case err == nil:
				if taken == nil || taken.Engine != "old" {
					t.Errorf("%s won without taking old's record over: %+v", s.Engine(), taken)
				}
				mu.Lock()
				winners = append(winners, s.Engine())
				mu.Unlock()
			case !errors.Is(err, placement.ErrNotOwner):
				t.Errorf("%s: %v", s.Engine(), err)
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("winners %v, want exactly one", winners)
	}
}

func TestReleaseAndScopeRelease(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	a, b := store(t, url, "a"), store(t, url, "b")
	ctx := t.Context()
	k := func(scope, thread, agent string) sandbox.Key {
		return sandbox.Key{Scope: scope, ThreadID: thread, AgentID: agent}
	}
	claim := func(s *placement.Store, key sandbox.Key) placement.Lease {
		t.Helper()
		l, _, err := s.Claim(ctx, key, "py")
		if err != nil {
			t.Fatalf("%s claims %v: %v", s.Engine(), key, err)
		}
		return l
	}
	l := claim(a, k("s", "t", "1"))
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("release: %v", err)
	}
	claim(b, k("s", "t", "1")) // released: free for anyone at once
	claim(a, k("s", "t", "2"))
	claim(a, k("s", "t", "3"))
	claim(a, k("s", "t.x", "1")) // another thread, whose name shares a prefix
	claim(a, k("s.t", "", "1"))  // and a scope that does
	n, err := a.ReleaseScope(ctx, "s", "t")
	if err != nil || n != 2 {
		t.Fatalf("ReleaseScope = %d, %v; want 2 (a's two, not b's)", n, err)
	}
	for key, want := range map[sandbox.Key]string{k("s", "t", "1"): "b", k("s", "t", "2"): "", k("s", "t", "3"): "",
		k("s", "t.x", "1"): "a", k("s.t", "", "1"): "a"} {
		r, ok, err := a.Get(ctx, key, "py")
		if err != nil || (want == "") == ok || (ok && r.Engine != want) {
			t.Errorf("%v after the purge: %+v, %v, %v; want owner %q", key, r, ok, err, want)
		}
	}
	if err := b.ReleaseKey(ctx, k("s", "t", "1"), "py", 0); err != nil {
		t.Fatalf("ReleaseKey: %v", err)
	}
	if _, ok, _ := a.Get(ctx, k("s", "t", "1"), "py"); ok {
		t.Fatalf("ReleaseKey left the entry")
	}
}

// TestLookupFollowsTheBucket: another engine's claim, takeover and release reach Lookup
// through the watch, and a store opened later starts with the whole bucket.
func TestLookupFollowsTheBucket(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	a, b := store(t, url, "a"), store(t, url, "b")
	k := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "x"}
	if _, ok := b.Lookup(k, "py"); ok {
		t.Fatalf("lookup of an unclaimed key found a record")
	}
	l, _, err := a.Claim(t.Context(), k, "py")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := a.Lookup(k, "py"); !ok || r.Engine != "a" || r.Revision != l.Revision {
		t.Fatalf("the claimer's own lookup: %+v, %v", r, ok)
	}
	eventually(t, "b's lookup sees a's claim", func() bool {
		r, ok := b.Lookup(k, "py")
		return ok && r.Engine == "a" && r.Revision == l.Revision
	})
	late := store(t, url, "late")
	if r, ok := late.Lookup(k, "py"); !ok || r.Engine != "a" {
		t.Fatalf("a store opened after the claim: %+v, %v", r, ok)
	}
	if err := a.Release(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's lookup sees the release", func() bool { _, ok := b.Lookup(k, "py"); return !ok })
	eventually(t, "a's lookup sees its own release", func() bool { _, ok := a.Lookup(k, "py"); return !ok })
}

func TestMembersExpireUnlessAnnounced(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	_, js := jsOn(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m, err := placement.NewMembers(ctx, js, placement.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty bucket lists %v, %v", got, err)
	}
	for i, e := range []string{"e1", "e2", "e3"} {
		if err := m.Announce(ctx, placement.Member{Engine: e, Daemon: "d", Sandboxes: i}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.List(ctx)
	if err != nil || len(got) != 3 || got[2].Engine != "e3" || got[2].Sandboxes != 2 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if err := m.Leave(ctx, "e1"); err != nil {
		t.Fatal(err)
	}
	// e2 keeps announcing, e3 falls silent.
	eventually(t, "e3 expires while e2 stays", func() bool {
		if err := m.Announce(ctx, placement.Member{Engine: "e2"}); err != nil {
			t.Fatal(err)
		}
		got, err := m.List(ctx)
		return err == nil && len(got) == 1 && got[0].Engine == "e2"
	})
}

// TestEntriesOfAKeyAndAConversation: KeyEntries reads every kind of one key (or the kind
// asked) and ScopeEntries every sandbox of a conversation, each with its record, and no
// other key's or conversation's; an entry that holds no record is skipped.
func TestEntriesOfAKeyAndAConversation(t *testing.T) {
	noLeaks(t)
	url := embedded(t)
	e1, e2 := store(t, url, "e1"), store(t, url, "e2")
	ctx := t.Context()
	key := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	sibling := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "b"}
	stranger := sandbox.Key{Scope: "s", ThreadID: "u", AgentID: "a"}
	for _, c := range []struct {
		s    *placement.Store
		key  sandbox.Key
		kind string
	}{{e1, key, "shell"}, {e2, key, "python"}, {e1, sibling, "shell"}, {e2, stranger, "shell"}} {
		if _, _, err := c.s.Claim(ctx, c.key, c.kind); err != nil {
			t.Fatal(err)
		}
	}
	_, js := jsOn(t, url)
	kv, err := js.KeyValue(ctx, placement.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, placement.EntryKey(key, "junk"), []byte("not a record")); err != nil {
		t.Fatal(err)
	}
	owners := func(es []placement.Entry) map[string]string {
		out := map[string]string{}
		for _, e := range es {
			out[e.Key.AgentID+"/"+e.Kind] = e.Record.Engine
		}
		return out
	}
	shell := "shell"
	for _, tc := range []struct {
		name string
		read func() ([]placement.Entry, error)
		want map[string]string
	}{
		{"every kind of a key", func() ([]placement.Entry, error) { return e1.KeyEntries(ctx, key, nil) },
			map[string]string{"a/shell": "e1", "a/python": "e2"}},
		{"one kind of a key", func() ([]placement.Entry, error) { return e2.KeyEntries(ctx, key, &shell) },
			map[string]string{"a/shell": "e1"}},
		{"a conversation", func() ([]placement.Entry, error) { return e2.ScopeEntries(ctx, "s", "t") },
			map[string]string{"a/shell": "e1", "a/python": "e2", "b/shell": "e1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := tc.read()
			if got := owners(es); err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			for _, e := range es {
				if e.Record.Revision == 0 || e.Record.Expires.IsZero() || e.Record.Engine == "" {
					t.Fatalf("entry %+v lacks its record", e)
				}
			}
		})
	}
	if r, ok := e2.Lookup(key, "python"); !ok || e2.Lapsed(r) {
		t.Fatalf("a fresh lease reads lapsed: %+v, %v", r, ok)
	}
	if !e1.Lapsed(placement.Record{Expires: time.Now().Add(-time.Minute)}) {
		t.Fatalf("a record that expired a minute ago does not read lapsed")
	}
}
