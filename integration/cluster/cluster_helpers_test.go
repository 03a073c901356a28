package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// dockerCluster is n engines on this machine's daemon, engine i on node i of a NATS cluster
// (failing over to the others), each with its placement store at 3 replicas.
type dockerCluster struct {
	c        *natscluster.Cluster
	backends []*actors.Backend
	stores   []*placement.Store
}

// connect opens a connection that prefers node and fails over to the rest, closed with t.
func (d *dockerCluster) connect(t *testing.T, node int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(d.c.URL(node)+","+d.c.URLs(), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newDockerCluster starts n engines named prefix1…prefixN on c.
func newDockerCluster(t *testing.T, c *natscluster.Cluster, n int, prefix string) *dockerCluster {
	t.Helper()
	d := &dockerCluster{c: c}
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i+1)
		b := itest.NewBackend(t)
		d.backends = append(d.backends, b)
		js, err := jetstream.New(d.connect(t, i))
		if err != nil {
			t.Fatal(err)
		}
		p, err := placement.New(itest.Context(t), js, id, placement.WithReplicas(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		d.stores = append(d.stores, p)
		router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
		if err != nil {
			t.Fatal(err)
		}
		svc, err := service.New(d.connect(t, i), router, service.WithPlacement(p), service.WithEngineID(id),
			service.WithLogger(zaptest.NewLogger(t).Named(id)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = svc.Stop(ctx)
		})
	}
	return d
}
