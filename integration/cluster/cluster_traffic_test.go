package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/sandbox"
)

// TestClusterNodeKillMidTrafficDocker: two engines on this machine's daemon, on a 3-node
// NATS cluster, each preferring its own node; three workers run execs that each append their
// own line to a file in their container while the node under the first engine and one worker
// is killed. Each line that the container's file holds ran once; an exec that succeeded left
// exactly one line, one that answered client.ErrOutcomeUnknown at most one, and no line is
// there twice.
func TestClusterNodeKillMidTrafficDocker(t *testing.T) {
	c := natscluster.Run(t, 3)
	d := newDockerCluster(t, c, 2, "d")
	backends := d.backends
	connect := func(node int) *nats.Conn { return d.connect(t, node) }
	spec := itest.BusyboxSpec(t)

	const workers = 3
	type outcome struct {
		sb        sandbox.Sandbox
		succeeded map[string]bool
		unknown   map[string]bool
	}
	outcomes := make([]outcome, workers)
	ready := make(chan int, workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		key := itest.NewKey(t)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Disposal finds the containers by label on the daemon: either backend does.
			if f := backends[1].Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				t.Errorf("dispose %s: %v", key, f)
			}
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outcomes[w]
			o.succeeded, o.unknown = map[string]bool{}, map[string]bool{}
			cl, err := client.New(itest.Context(t), connect(w%3), client.WithLivenessInterval(200*time.Millisecond))
			if err != nil {
				t.Error(err)
				ready <- w
				return
			}
			ctx := itest.Context(t)
			// The first worker's key on the first engine, whose node is killed.
			acq := cl
			if w == 0 {
				if acq, err = client.New(ctx, connect(0), client.WithEngine("d1"), client.WithLivenessInterval(200*time.Millisecond)); err != nil {
					t.Error(err)
					ready <- w
					return
				}
			}
			o.sb, err = acq.Acquire(ctx, key, spec)
			ready <- w
			if err != nil {
				t.Errorf("worker %d: acquire: %v", w, err)
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				line := fmt.Sprintf("w%d-%d", w, i)
				_, err := o.sb.Exec(ctx, sandbox.Argv("sh", "-c", "echo "+line+" >> ran.log"), ".", time.Minute)
				switch {
				case err == nil:
					o.succeeded[line] = true
				case errors.Is(err, client.ErrOutcomeUnknown):
					o.unknown[line] = true
				default:
					t.Errorf("worker %d: exec: %v, want a result or client.ErrOutcomeUnknown", w, err)
					return
				}
			}
		}()
	}
	for range workers {
		<-ready
	}
	time.Sleep(3 * time.Second) // execs under way
	c.Kill(0)
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	total, unknown, unknownRan := 0, 0, 0
	for w, o := range outcomes {
		b, err := o.sb.ReadFile(itest.Context(t), "ran.log", ".", 1<<20)
		if err != nil {
			t.Fatalf("worker %d: read its log: %v", w, err)
		}
		ran := map[string]int{}
		for _, line := range strings.Fields(string(b)) {
			ran[line]++
		}
		for line, n := range ran {
			switch {
			case n > 1:
				t.Errorf("%s ran %d times", line, n)
			case !o.succeeded[line] && !o.unknown[line]:
				t.Errorf("%s ran, but its caller got neither a result nor outcome-unknown", line)
			}
		}
		for line := range o.succeeded {
			if ran[line] != 1 {
				t.Errorf("%s succeeded but ran %d times", line, ran[line])
			}
		}
		total += len(o.succeeded)
		unknown += len(o.unknown)
		for line := range o.unknown {
			unknownRan += ran[line]
		}
	}
	t.Logf("%d execs succeeded, %d answered outcome unknown (%d of those ran)", total, unknown, unknownRan)
}
