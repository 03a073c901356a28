package console

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/console"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/service"
)

// connectNode connects to node i of c only (no other URL to fail over to), closed with t.
func connectNode(t *testing.T, c *natscluster.Cluster, i int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URL(i), nats.Name(fmt.Sprintf("console-test-n%d", i+1)))
	if err != nil {
		t.Fatalf("connect to node %d: %v", i+1, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// clusterEngine serves an engine on real Docker connected to node i of c, recording its
// audit stream there.
func clusterEngine(t *testing.T, c *natscluster.Cluster, i int) (*service.Service, *actors.Backend) {
	t.Helper()
	nc := connectNode(t, c, i)
	ev, err := events.New(itest.Context(t), nc, events.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("new events on node %d: %v", i+1, err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	b := itest.NewBackend(t)
	return itest.ServeObservedOn(t, nc, b, ev), b
}

// TestConsoleOnAThreeNodeCluster: two engines on nodes 1 and 2 of a
// 3-node NATS cluster of containers, the console a client of node 3 only; the page lists both
// engines, and a sandbox acquired through the pool (a client of node 3) within 2 s, on the row
// of the engine that holds it. Everything the page shows crossed the cluster's routes.
func TestConsoleOnAThreeNodeCluster(t *testing.T) {
	c := natscluster.Run(t, 3)
	first, b := clusterEngine(t, c, 0)
	second, _ := clusterEngine(t, c, 1)

	con, err := console.New(connectNode(t, c, 2), console.WithLogger(zaptest.NewLogger(t)),
		console.WithIdentity("node n3"), console.WithPoll(200*time.Millisecond, 5*time.Second))
	if err != nil {
		t.Fatalf("new console: %v", err)
	}
	web := httptest.NewServer(con.Handler())
	t.Cleanup(func() {
		_ = con.Close()
		web.Close()
	})

	tab := browser(t)
	if err := within(t, tab, 30*time.Second, chromedp.Navigate(web.URL+"/"),
		chromedp.WaitVisible(`#engines tbody tr[data-engine="`+first.EngineID()+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#engines tbody tr[data-engine="`+second.EngineID()+`"]`, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page never listed both engines: %v", err)
	}

	pool, err := client.New(itest.Context(t), connectNode(t, c, 2))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	sb := itest.AcquireRemote(t, pool, b, itest.NewKey(t), itest.BusyboxSpec(t))
	acquired := time.Now()
	row := `#sandboxes tr[data-instance="` + sb.InstanceID() + `"]`
	var text string
	if err := within(t, tab, 2*time.Second, chromedp.WaitVisible(row, chromedp.ByQuery),
		chromedp.Text(row, &text, chromedp.ByQuery)); err != nil {
		t.Fatalf("the page did not list the acquired sandbox within 2 s: %v", err)
	}
	t.Logf("listed %s after %s", sb.InstanceID()[:12], time.Since(acquired).Round(time.Millisecond))
	if engine := sb.(*client.Sandbox).Engine(); !strings.Contains(text, engine) {
		t.Fatalf("the row says %q, want its engine %s", text, engine)
	}
}
