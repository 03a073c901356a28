package events

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// fakeProxies answers Gone from a set of existing proxy IDs, and EngineID.
type fakeProxies struct {
	mu    sync.Mutex
	exist map[string]bool
}

func (f *fakeProxies) Gone(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.exist[id], nil
}

func (f *fakeProxies) EngineID(context.Context) (string, error) { return "E", nil }

// The recovery loop New starts (engine serve's, and an embedding worker's): its first pass, publishes the pending window of a
// proxy that is gone and leaves that of one that exists; a later pass publishes that one once
// its proxy is gone too. Nothing pending is left.
func TestRecoveryLoop(t *testing.T) {
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := "maf.unit.pending"
	proxies := &fakeProxies{exist: map[string]bool{}}
	ev, err := New(ctx, nc, WithPrefix(prefix), WithDaemon(proxies), WithRecoveryEvery(0),
		WithOutbox(WithBackoff(time.Millisecond, 10*time.Millisecond)), WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ev.Close(ctx) }()
	store := ev.Pending()
	gone, kept := strings.Repeat("a", 64), strings.Repeat("b", 64)
	proxies.exist[kept] = true
	for _, id := range []string{gone, kept} {
		w := sandbox.EgressWindow{ProxyID: id, ProxyName: "p", Kind: "codeact", Key: sandbox.Key{Scope: "s", ThreadID: "t"},
			Attribution: string(egresslog.AttributionLabel), Closed: true, Trigger: string(egresslog.TriggerDispose),
			Decisions: []sandbox.EgressDecision{{Decision: sandbox.DecisionAllow, Host: "a.example", Port: 443}}}
		if err := store.Put(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
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
	pending := func() int {
		ws, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ws)
	}
	waitUntil := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d events, %d pending", what, stored(), pending())
			}
		}
	}
	stop := ev.recoverEvery(ctx, 50*time.Millisecond)
	defer stop()
	waitUntil("the first pass", func() bool { return stored() == 1 && pending() == 1 })
	proxies.mu.Lock()
	delete(proxies.exist, kept)
	proxies.mu.Unlock()
	waitUntil("a later pass", func() bool { return stored() == 2 && pending() == 0 })
}
