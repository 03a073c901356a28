package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// ClusterConfig says what `engine bench --cluster` runs on: backends built by newBackend
// (each with the options it is given), on the local daemon.
type ClusterConfig struct {
	Config
	NewBackend func(ctx context.Context, opts ...actors.Option) (*actors.Backend, error)
}

// Cluster measures the snapshot rows over NATS: three NATS servers clustered with JetStream
// (in this process, on loopback), three engines (a backend, a router and the service each, on
// its own server, their snapshots in the cluster's object store), and clients pinned to them.
// snapshot_100mib is a snapshot through engine 1 stored in JetStream; fork_8 one snapshot
// forked into 8 sandboxes through engine 1; restore_other_engine_50mib a 50 MiB snapshot taken
// on engine 1 restored through engine 3, whose daemon loads its image each time (every rep's
// snapshot is a new one). Everything made is disposed and deleted before it returns.
func Cluster(ctx context.Context, cfg ClusterConfig, report func(Row)) error {
	dir, err := os.MkdirTemp("", "maf-sandbox-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	servers, err := natsCluster(dir, 3)
	defer func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	if err != nil {
		return err
	}
	var clients []*client.Backend
	for i, s := range servers {
		c, stop, err := clusterEngine(ctx, cfg, s, fmt.Sprintf("bench%d", i+1))
		if err != nil {
			return err
		}
		defer stop()
		clients = append(clients, c)
	}
	r := &runner{cfg: cfg.Config, scope: "bench-" + randomHex()}
	defer func() { _ = clients[0].DisposeScope(context.WithoutCancel(ctx), r.scope, "bench") }()
	defer func() { _ = clients[2].DisposeScope(context.WithoutCancel(ctx), r.scope, "bench") }()
	files, _, err := specs(cfg.Config)
	if err != nil {
		return err
	}
	return clusterRows(ctx, r, clients[0], clients[2], files, report)
}

func clusterRows(ctx context.Context, r *runner, first, third *client.Backend, files sandbox.Spec, report func(Row)) error {
	sb, err := first.Acquire(ctx, r.key("snapshot"), files)
	if err != nil {
		return err
	}
	if err := r.sh(ctx, sb, "mkdir -p /data && dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null"); err != nil {
		return err
	}
	var snaps []string
	defer func() {
		for _, id := range snaps {
			_ = first.DeleteSnapshot(context.WithoutCancel(ctx), id)
		}
	}()
	take := func() error {
		info, err := sb.(sandbox.Snapshottable).Snapshot(ctx)
		if err == nil {
			snaps = append(snaps, info.ID)
		}
		return err
	}
	row, err := r.timeN(ctx, "snapshot_100mib", min(r.cfg.Reps, 5), nil, take)
	if err != nil {
		return err
	}
	row.Note = "through engine 1 of three, stored in JetStream's object store"
	report(row)
	if err := r.sh(ctx, sb, "rm /data/big && dd if=/dev/urandom of=/data/mid bs=1M count=50 2>/dev/null"); err != nil {
		return err
	}
	var id string
	row, err = r.timeN(ctx, "restore_other_engine_50mib", min(r.cfg.Reps, 5), func() error {
		err := take()
		id = snaps[len(snaps)-1]
		return err
	}, func() error {
		_, err := third.Restore(ctx, r.key("restored"), files, id)
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "a new 50 MiB snapshot of engine 1 each rep, restored through engine 3: fetched from JetStream, checked, loaded, started"
	report(row)
	var forks []sandbox.Key
	row, err = r.timeN(ctx, "fork_8", min(r.cfg.Reps, 10), func() error {
		for _, k := range forks {
			first.Dispose(ctx, k, sandbox.DisposeOptions{})
		}
		forks = forks[:0]
		for range 8 {
			forks = append(forks, r.key("fork"))
		}
		return nil
	}, func() error {
		_, err := first.Fork(ctx, id, forks, files)
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "one 50 MiB snapshot into 8 new sandboxes through engine 1, each running, in all (its image loaded by the warm-up)"
	report(row)
	return nil
}

// clusterEngine starts one engine on s and returns a client pinned to it.
func clusterEngine(ctx context.Context, cfg ClusterConfig, s *server.Server, id string) (*client.Backend, func(), error) {
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return nil, nil, err
	}
	store, err := events.NewSnapshots(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	b, err := cfg.NewBackend(ctx, actors.WithSnapshotStore(store))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
	if err == nil {
		var svc *service.Service
		if svc, err = service.New(nc, router, service.WithEngineID(id), service.WithLogger(zap.NewNop())); err == nil {
			c, cerr := client.New(ctx, nc, client.WithEngine(id))
			stop := func() {
				_ = svc.Stop(context.WithoutCancel(ctx))
				b.Close(context.WithoutCancel(ctx))
				nc.Close()
			}
			if cerr != nil {
				stop()
				return nil, nil, cerr
			}
			return c, stop, nil
		}
	}
	b.Close(ctx)
	nc.Close()
	return nil, nil, err
}

// natsCluster starts n JetStream servers on loopback, routed to one another, and waits until
// JetStream has its meta leader.
func natsCluster(dir string, n int) ([]*server.Server, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(p))
	}
	var out []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("bench-n%d", i+1), Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
			JetStream: true, StoreDir: fmt.Sprintf("%s/n%d", dir, i+1),
			Cluster: server.ClusterOpts{Name: "maf-sandbox-bench", Host: "127.0.0.1", Port: ports[i]}}
		opts.Routes = server.RoutesFromStr(joinRoutes(routes))
		s, err := server.NewServer(opts)
		if err != nil {
			return out, err
		}
		go s.Start()
		out = append(out, s)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range out {
		if !s.ReadyForConnections(10 * time.Second) {
			return out, errors.New("a bench NATS server did not start")
		}
	}
	for time.Now().Before(deadline) {
		if out[0].JetStreamIsLeader() || out[1].JetStreamIsLeader() || out[2].JetStreamIsLeader() {
			return out, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, errors.New("the bench NATS cluster elected no JetStream leader")
}

func joinRoutes(r []string) string {
	out := ""
	for i, s := range r {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
