package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// TestClusterOneContainerPerKeyDocker: three engines on this machine's daemon, each on its own
// node of a 3-node NATS cluster, and 50 workers acquiring 20 keys of one scope at once through
// the pool from clients on every node. The daemon then holds exactly 20 containers of the
// scope, every worker of a key was served by one engine, and that engine is the one the
// placement record names.
func TestClusterOneContainerPerKeyDocker(t *testing.T) {
	d := newDockerCluster(t, natscluster.Run(t, 3), 3, "k")
	backends, stores := d.backends, d.stores
	spec := itest.BusyboxSpec(t)
	scope := itest.NewKey(t).Scope
	const workers, keys = 50, 20
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Disposal finds the containers by label on the daemon: any backend does.
		for i := range keys {
			key := sandbox.Key{Scope: scope, ThreadID: fmt.Sprint(i), AgentID: "agent"}
			if f := backends[0].Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose %v: %v", key, f)
			}
		}
	})

	var mu sync.Mutex
	served := map[sandbox.Key]map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := itest.Context(t)
			cl, err := client.New(ctx, d.connect(t, w%3))
			if err != nil {
				t.Error(err)
				return
			}
			key := sandbox.Key{Scope: scope, ThreadID: fmt.Sprint(w % keys), AgentID: "agent"}
			sb, err := cl.Acquire(ctx, key, spec)
			if err != nil {
				t.Errorf("worker %d: acquire: %v", w, err)
				return
			}
			if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
				t.Errorf("worker %d: exec: %v", w, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if served[key] == nil {
				served[key] = map[string]bool{}
			}
			served[key][sb.(*client.Sandbox).Engine()] = true
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if got := keyContainers(t, sandbox.Key{Scope: scope}); len(got) != keys {
		t.Fatalf("%d containers of the scope on the daemon, want %d", len(got), keys)
	}
	if len(served) != keys {
		t.Fatalf("%d keys served, want %d", len(served), keys)
	}
	for key, engines := range served {
		if len(engines) != 1 {
			t.Errorf("%v served by %v, want one engine", key, engines)
			continue
		}
		var owner string
		for e := range engines {
			owner = e
		}
		// Every engine's watched copy of the bucket names that engine as the owner.
		for i, s := range stores {
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, ok := s.Owner(key, spec.Kind)
				if ok && got == owner {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%v: engine k%d's placement copy names %q (%v), want %s", key, i+1, got, ok, owner)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// placementProbe reads a cluster's placement and members buckets from url, as any client can.
type placementProbe struct {
	t       *testing.T
	nc      *nats.Conn
	members *placement.Members
}

func newPlacementProbe(t *testing.T, url string) *placementProbe {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.KeyValue(itest.Context(t), placement.DefaultBucket); err != nil {
		t.Fatalf("open the placement bucket: %v", err)
	}
	members, err := placement.NewMembers(itest.Context(t), js)
	if err != nil {
		t.Fatalf("open the members bucket: %v", err)
	}
	return &placementProbe{t: t, nc: nc, members: members}
}

// entry reports whether the bucket holds an entry for (key, kind), and the engine it names. It
// asks the bucket stream's leader: a KV Get is a direct get, which any replica answers, and a
// replica that has not applied the last write (a release the dispose just made) answers with
// what it replaced. A request sent while the stream elects a leader is not answered, so each
// has 5 s and is sent again.
func (p *placementProbe) entry(key sandbox.Key, kind string) (string, bool) {
	p.t.Helper()
	stream := "KV_" + placement.DefaultBucket
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + placement.DefaultBucket + "." + placement.EntryKey(key, kind)})
	var resp struct {
		Message *struct {
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	ctx := itest.Context(p.t)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := p.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+stream, req)
		cancel()
		if err == nil {
			if err := json.Unmarshal(msg.Data, &resp); err != nil {
				p.t.Fatalf("the entry of %v: %v", key, err)
			}
			break
		}
		if ctx.Err() != nil {
			p.t.Fatalf("read the entry of %v from %s's leader: %v", key, stream, err)
		}
	}
	const noMessage = 10037 // JetStream's "no message found"
	switch {
	case resp.Error != nil && resp.Error.ErrCode == noMessage:
		return "", false
	case resp.Error != nil:
		p.t.Fatalf("read the entry of %v: %s", key, resp.Error.Description)
	case resp.Message == nil:
		p.t.Fatalf("read the entry of %v: an answer without a message", key)
	}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			p.t.Fatalf("the entry of %v: %v", key, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return "", false
		}
	}
	var r placement.Record
	if err := json.Unmarshal(resp.Message.Data, &r); err != nil {
		p.t.Fatalf("entry of %v: %v", key, err)
	}
	return r.Engine, true
}

// announced is the number of sandboxes engine's members record counts (-1 without a record).
func (p *placementProbe) announced(engine string) int {
	p.t.Helper()
	ms, err := p.members.List(itest.Context(p.t))
	if err != nil {
		p.t.Fatalf("list the members: %v", err)
	}
	for _, m := range ms {
		if m.Engine == engine {
			return m.Sandboxes
		}
	}
	return -1
}

// TestClusterDisposeOnANonOwnerEndsTheOwnersEntry: two `engine serve --placement` processes
// on this machine's daemon, each on its own node of a 3-node cluster. Each engine acquires two
// keys; every key is then disposed through the engine that does not own it. Each key's
// containers go, its placement entry goes, and its owner counts it no more: health says 0
// sandboxes and so, at its next announcement, does its members record, which the pool's
// choice of engine reads. Then a conversation with a sandbox on each engine is purged through
// one of them, with the same outcome for both.
func TestClusterDisposeOnANonOwnerEndsTheOwnersEntry(t *testing.T) {
	c := natscluster.Run(t, 3)
	bin := itest.BuildEngine(t)
	engines := []string{"pa", "pb"}
	clusterServe(t, bin, c.URL(0), "pa")
	clusterServe(t, bin, c.URL(1), "pb")
	waitFor(t, "both engines reachable from node 3", func() bool {
		return engineReachable(t, c.URL(2), "pa") && engineReachable(t, c.URL(2), "pb")
	})
	probe := newPlacementProbe(t, c.URL(2))
	pinned := map[string]*client.Backend{}
	for _, e := range engines {
		pinned[e] = clusterClient(t, c.URL(2), client.WithEngine(e))
	}
	spec := itest.BusyboxSpec(t)
	ctx := itest.Context(t)
	owners := map[sandbox.Key]int{}
	for i := range 4 {
		key := itest.NewKey(t)
		t.Cleanup(func() { itest.NewBackend(t).Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
		if _, err := pinned[engines[i%2]].Acquire(ctx, key, spec); err != nil {
			t.Fatalf("acquire on %s: %v", engines[i%2], err)
		}
		owners[key] = i % 2
	}
	for key, o := range owners {
		if got, ok := probe.entry(key, spec.Kind); !ok || got != engines[o] {
			t.Fatalf("entry of %v names %q (%v), want %s", key, got, ok, engines[o])
		}
	}
	for _, e := range engines {
		if h, err := pinned[e].Health(ctx); err != nil || h.Sandboxes != 2 {
			t.Fatalf("%s's health before: %+v, %v; want 2 sandboxes", e, h, err)
		}
	}

	for key, o := range owners {
		if f := pinned[engines[1-o]].Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("dispose %v through %s: %v", key, engines[1-o], f)
		}
		if got, ok := probe.entry(key, spec.Kind); ok {
			t.Errorf("disposed through %s, %v keeps its entry, naming %s", engines[1-o], key, got)
		}
		if ids := keyContainers(t, key); len(ids) != 0 {
			t.Errorf("disposed through %s, %v keeps containers %v", engines[1-o], key, ids)
		}
	}
	for _, e := range engines {
		if h, err := pinned[e].Health(ctx); err != nil || h.Sandboxes != 0 {
			t.Errorf("%s's health after every dispose: %+v, %v; want 0 sandboxes", e, h, err)
		}
		waitFor(t, e+"'s members record counting no sandbox", func() bool { return probe.announced(e) == 0 })
	}

	// A scope purge of a conversation with a sandbox on each engine, through one of them.
	conv := itest.NewKey(t)
	t.Cleanup(func() { itest.NewBackend(t).DisposeScope(context.Background(), conv.Scope, conv.ThreadID) })
	var keys []sandbox.Key
	for i, e := range engines {
		key := conv
		key.AgentID = fmt.Sprintf("agent-%d", i)
		if _, err := pinned[e].Acquire(ctx, key, spec); err != nil {
			t.Fatalf("acquire on %s: %v", e, err)
		}
		keys = append(keys, key)
	}
	if p := pinned["pb"].DisposeScope(ctx, conv.Scope, conv.ThreadID); p.Undisposed != nil || p.Disposed != 2 {
		t.Fatalf("purge through pb: %+v, want 2 disposed and no failure", p)
	}
	for _, key := range keys {
		if got, ok := probe.entry(key, spec.Kind); ok {
			t.Errorf("purged through pb, %v keeps its entry, naming %s", key, got)
		}
	}
	if ids := keyContainers(t, conv); len(ids) != 0 {
		t.Errorf("purged through pb, the conversation keeps containers %v", ids)
	}
	for _, e := range engines {
		if h, err := pinned[e].Health(ctx); err != nil || h.Sandboxes != 0 {
			t.Errorf("%s's health after the purge: %+v, %v; want 0 sandboxes", e, h, err)
		}
	}
}

// TestClusterDisposeEndsAKilledOwnersEntry: engine pa, an `engine serve --placement` process,
// acquires a key and is killed (SIGKILL): its entry stays, as it must while its lease may
// still be live. The key is then disposed through pb. Until pa's lease lapses the dispose
// answers unreachable (only an owner may touch its sandbox, and pb cannot tell a dead owner
// from one cut off from NATS); then pb takes the entry over, disposes the key and deletes the
// entry.
func TestClusterDisposeEndsAKilledOwnersEntry(t *testing.T) {
	c := natscluster.Run(t, 3)
	bin := itest.BuildEngine(t)
	a, _ := clusterServe(t, bin, c.URL(0), "pa")
	clusterServe(t, bin, c.URL(1), "pb")
	waitFor(t, "both engines reachable from node 3", func() bool {
		return engineReachable(t, c.URL(2), "pa") && engineReachable(t, c.URL(2), "pb")
	})
	probe := newPlacementProbe(t, c.URL(2))
	key, spec := itest.NewKey(t), itest.BusyboxSpec(t)
	t.Cleanup(func() { itest.NewBackend(t).Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	ctx := itest.Context(t)
	if _, err := clusterClient(t, c.URL(2), client.WithEngine("pa")).Acquire(ctx, key, spec); err != nil {
		t.Fatalf("acquire on pa: %v", err)
	}
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill pa: %v", err)
	}
	if got, ok := probe.entry(key, spec.Kind); !ok || got != "pa" {
		t.Fatalf("after the kill the entry names %q (%v), want pa", got, ok)
	}
	b := clusterClient(t, c.URL(2), client.WithEngine("pb"))
	// Each attempt has a bound of its own: just after the kill the cluster's routes may still
	// show pa's subscriptions, and a forward into them gets no answer at all (not even NATS's
	// no-responders), so that attempt ends in timeout rather than unreachable.
	waitFor(t, "a dispose through pb succeeding", func() bool {
		actx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f := b.Dispose(actx, key, sandbox.DisposeOptions{})
		if f != nil && f.Code != sandbox.DisposalUnreachable && f.Code != sandbox.DisposalTimeout {
			t.Fatalf("dispose through pb while pa's lease lapses: %v, want unreachable, timeout or success", f)
		}
		return f == nil
	})
	if got, ok := probe.entry(key, spec.Kind); ok {
		t.Fatalf("disposed through pb, the dead owner's entry stays, naming %s", got)
	}
	if ids := keyContainers(t, key); len(ids) != 0 {
		t.Fatalf("disposed through pb, the key keeps containers %v", ids)
	}
}
