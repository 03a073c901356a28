package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/sandbox"
)

// TestClusterOneContainerPerKeyDocker: three engines on this machine's daemon, each on its own
// node of a 3-node NATS cluster, and 50 workers acquiring 20 keys of one scope at once through
// the pool from clients on every node. The daemon then holds exactly 20 containers of the
// scope, every worker of a key was served by one engine, and that engine is the one the
// placement record names. It is about the cluster, not the driver: it runs once per make
// test, in the API driver's pass.
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
