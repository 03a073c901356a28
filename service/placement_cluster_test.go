package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
	"github.com/mafsandbox/engine/service"
)

// clusterEngine starts a service with placement whose connections all go to url.
func clusterEngine(t *testing.T, url, id string, connOpts []nats.Option, popts ...placement.Option) (*service.Service, *sandboxtest.Backend) {
	t.Helper()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(url, connOpts...)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	js, err := jetstream.New(connect())
	if err != nil {
		t.Fatal(err)
	}
	p, err := placement.New(ctxT(t), js, id, popts...)
	if err != nil {
		t.Fatalf("placement %s: %v", id, err)
	}
	t.Cleanup(p.Close)
	fake := newFake(t)
	router, err := sandbox.NewRouter([]sandbox.Backend{fake}, sandbox.WithMinIsolation(sandbox.IsolationNone))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(connect(), router, service.WithPlacement(p), service.WithLogger(zaptest.NewLogger(t).Named(id)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Stop(ctx) // the cut engine's drain may not reach the server; it is abandoned
	})
	return svc, fake
}

// TestPlacementClusterPartitionedEngineIsTakenOver runs two engines on a 3-node NATS cluster
// (placement bucket at 3 replicas), the first reaching the cluster only through a relay. Cut
// off, its clients get engine_unavailable, its lease lapses and the other engine takes the
// sandbox over; after the heal the cut engine refuses the sandbox and drops it.
func TestPlacementClusterPartitionedEngineIsTakenOver(t *testing.T) {
	c := natscluster.Run(t, 3)
	popts := []placement.Option{placement.WithReplicas(3), placement.WithLease(time.Second), placement.WithGrace(200 * time.Millisecond)}
	relay := natscluster.NewRelay(t, strings.TrimPrefix(c.URL(0), "nats://"))
	cutOpts := []nats.Option{nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	a, fakeA := clusterEngine(t, relay.URL(), "a", cutOpts, popts...)
	_, fakeB := clusterEngine(t, c.URL(1), "b", nil, popts...)

	newCli := func(opts ...client.Option) *client.Backend {
		nc, err := nats.Connect(c.URL(2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		cl, err := client.New(ctxT(t), nc, append([]client.Option{client.WithRetryWait(0),
			client.WithLivenessInterval(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx := ctxT(t)
	// Subscriptions reach the other nodes a moment after the engines make them.
	reachable := func(id string) bool {
		nc, err := nats.Connect(c.URL(2))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_, err = nc.Request(messages.Engine(messages.SubjectEngineAliveT, messages.DefaultPrefix, id), nil, time.Second)
		return err == nil
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitUntil("both engines reachable from node 3", func() bool { return reachable("a") && reachable("b") })
	sb, err := newCli(client.WithEngine(a.EngineID())).Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire on a: %v", err)
	}
	if _, err := sb.StatFile(ctx, ".", "."); err != nil {
		t.Fatalf("stat on a: %v", err)
	}

	relay.Cut()
	if _, err := sb.StatFile(ctx, ".", "."); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call on the cut engine: %v, want engine_unavailable", err)
	}
	pool := newCli()
	var sb2 sandbox.Sandbox
	deadline := time.Now().Add(20 * time.Second)
	for {
		sb2, err = pool.Acquire(ctx, testKey, testSpec(t))
		if err == nil {
			break
		}
		if !errors.Is(err, messages.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("acquire while a's lease lapses: %v, want engine_unavailable until b takes over", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := sb2.(*client.Sandbox).Engine(); got != "b" {
		t.Fatalf("the sandbox was taken over by %s, want b", got)
	}
	if len(fakeB.Live()) != 1 {
		t.Fatalf("b holds %v", fakeB.Live())
	}
	before := len(fakeA.Sandbox().ExecCalls())
	relay.Heal()
	waitUntil("a back after the heal, its renewal refused and the handle dropped", func() bool {
		if !reachable("a") {
			return false
		}
		h, err := newCli(client.WithEngine(a.EngineID())).Health(ctx)
		return err == nil && h.Sandboxes == 0
	})
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err == nil {
		t.Fatalf("the cut engine served the taken-over sandbox after the heal")
	}
	if after := len(fakeA.Sandbox().ExecCalls()); after != before {
		t.Fatalf("a's backend saw %d calls after the heal", after-before)
	}
	if _, err := sb2.StatFile(ctx, ".", "."); err != nil {
		t.Fatalf("the taker serves the sandbox: %v", err)
	}
}

// TestPlacementClusterOneSandboxPerKey: 50 workers acquire 20 keys at once through 3 engines,
// each on its own node of a 3-node cluster; each key's sandbox exists on exactly one engine's
// backend, and every worker of a key was served by that engine. (Killing a node mid-traffic
// loses the calls whose request or reply crossed it: see docs/operations.md.)
func TestPlacementClusterOneSandboxPerKey(t *testing.T) {
	c := natscluster.Run(t, 3)
	popts := []placement.Option{placement.WithReplicas(3)}
	failover := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	var fakes []*sandboxtest.Backend
	for i := range 3 {
		// Each engine prefers its own node and fails over to the others.
		urls := c.URL(i) + "," + c.URLs()
		_, fake := clusterEngine(t, urls, fmt.Sprintf("e%d", i+1), append(failover, nats.DontRandomize()), popts...)
		fakes = append(fakes, fake)
	}

	const workers, keys = 50, 20
	var mu sync.Mutex
	served := map[sandbox.Key]map[string]bool{}
	var wg sync.WaitGroup
	work := func(w int) {
		defer wg.Done()
		nc, err := nats.Connect(c.URL(w%3), failover...)
		if err != nil {
			t.Error(err)
			return
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cl, err := client.New(ctx, nc)
		if err != nil {
			t.Error(err)
			return
		}
		key := sandbox.Key{Scope: "s", ThreadID: fmt.Sprint(w % keys), AgentID: "a"}
		sb, err := cl.Acquire(ctx, key, testSpec(t))
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
	}
	for w := range workers {
		wg.Add(1)
		go work(w)
	}
	wg.Wait()
	live := map[sandbox.SandboxID]string{}
	for i, f := range fakes {
		for _, id := range f.Live() {
			if other, ok := live[id]; ok {
				t.Errorf("%v is live on %s and e%d", id, other, i+1)
			}
			live[id] = fmt.Sprintf("e%d", i+1)
		}
	}
	if len(live) != keys {
		t.Fatalf("%d sandboxes live, want %d", len(live), keys)
	}
	for id, eng := range live {
		if len(served[id.Key]) != 1 || !served[id.Key][eng] {
			t.Errorf("%v lives on %s but was served by %v", id.Key, eng, served[id.Key])
		}
	}
}
