package natscluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// readyTimeout bounds how long [Run] and [Cluster.Start] wait for nodes to report healthy.
const readyTimeout = 60 * time.Second

// buildTimeout bounds building the server image (a go build on a cold cache).
const buildTimeout = 10 * time.Minute

// Cluster is a running NATS cluster of containers.
type Cluster struct {
	t       testing.TB
	Network string // the Docker network's name
	Name    string // the NATS cluster name
	nodes   []*node
}

type node struct {
	alias     string // the node's name on the network and in NATS
	container string // the container's name
	ip        string // its address on the network, reachable from the host
}

// Option changes how [Run] starts the nodes.
type Option func(*runConfig)

type runConfig struct{ noAdvertise bool }

// WithNoAdvertise starts the nodes with --no_advertise: a client learns no other node's
// address from the one it connects to, so a process connected through a [Relay] stays cut
// off when the relay is cut, whatever its reconnect options (an engine process, say).
func WithNoAdvertise() Option { return func(c *runConfig) { c.noAdvertise = true } }

// Run builds the NATS server image if it is not current, starts an n-node cluster and waits
// until every node reports healthy with JetStream (its /healthz, which needs the JetStream
// meta group to have a leader). The containers and the network are removed when the test
// ends. It calls t.Fatal on any failure.
func Run(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	dockertest.Require(t)
	if n < 1 {
		t.Fatalf("natscluster: %d nodes", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	err := images.EnsureNATS(ctx, "docker", images.NATSTag)
	cancel()
	if err != nil {
		t.Fatalf("natscluster: build the server image: %v", err)
	}
	id := strings.ToLower(nuid.Next()[12:])
	c := &Cluster{t: t, Network: "maf-natscluster-" + id, Name: "maf-" + id}
	// Registered first and run last (cleanups are LIFO): the network goes after its containers.
	dockertest.CleanupNetwork(t, c.Network)
	dockertest.Docker(t, append(append([]string{"network", "create", "--internal"}, dockertest.LabelArgs()...), c.Network)...)

	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://n%d:6222", i+1)
	}
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	for i := range n {
		alias := fmt.Sprintf("n%d", i+1)
		nd := &node{alias: alias, container: c.Network + "-" + alias}
		args := []string{
			"--name", alias, "--cluster_name", c.Name,
			"--cluster", "nats://0.0.0.0:6222", "--routes", strings.Join(routes, ","),
			"--jetstream", "--store_dir", "/data", "--http_port", "8222",
		}
		if cfg.noAdvertise {
			args = append(args, "--no_advertise")
		}
		dockertest.RunContainerCmd(t, images.NATSTag, args, "--name", nd.container, "--network", c.Network, "--network-alias", alias,
			"--tmpfs", "/data:rw,uid=65532,gid=65532,mode=0700")
		c.nodes = append(c.nodes, nd)
	}
	for i := range c.nodes {
		c.refresh(i)
	}
	// Registered after the containers' removal, so it runs before it: a failed test's log
	// says what each node thought of its streams when the test gave up.
	t.Cleanup(func() {
		if t.Failed() {
			c.report()
		}
	})
	c.waitHealthy(c.nodes...)
	return c
}

// report logs, for each node, the streams it knows and their leaders (its /jsz) and the
// tail of its log. A killed node answers neither; its log is what it wrote before the kill.
func (c *Cluster) report() {
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	for _, nd := range c.nodes {
		jsz := "unanswered"
		if resp, err := hc.Get("http://" + nd.ip + ":8222/jsz?streams=true&raft=true"); err != nil {
			jsz = err.Error()
		} else {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			jsz = string(b)
		}
		out, errOut, _ := dockertest.DockerErr(context.Background(), "logs", "--tail", "40", nd.container)
		c.t.Logf("natscluster: node %s after the failure: /jsz: %s\nlog:\n%s%s", nd.alias, jsz, out, errOut)
	}
}

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.nodes) }

// URL is node i's client URL.
func (c *Cluster) URL(i int) string { return "nats://" + c.nodes[i].ip + ":4222" }

// URLs is every node's client URL, comma separated, as nats.Connect takes a server list.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// Connect opens a client connection to the whole cluster (it fails over between nodes), closed
// when the test ends. Extra options come after the defaults: reconnect forever, every 100 ms.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(c.URLs(), opts...)
	if err != nil {
		t.Fatalf("natscluster: connect to %s: %v", c.URLs(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Kill kills node i's server (SIGKILL: no lame duck, no goodbye to its routes).
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	dockertest.Docker(c.t, "kill", c.nodes[i].container)
}

// Start starts node i again after [Cluster.Kill] and waits until it reports healthy. Its
// tmpfs store is gone, so it rejoins empty and catches up from its peers.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	dockertest.Docker(c.t, "start", c.nodes[i].container)
	c.refresh(i)
	c.waitHealthy(c.nodes[i])
}

// Lead makes node i the leader of the named stream: it asks the stream's leader to step down
// in favour of node i, and asks again until the stream's info names node i. A test that then
// kills node i knows the survivors must elect a new leader. It calls t.Fatal when node i does
// not lead within readyTimeout.
func (c *Cluster) Lead(stream string, i int) {
	c.t.Helper()
	nc := c.Connect(c.t)
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatalf("natscluster: jetstream: %v", err)
	}
	want := c.nodes[i].alias
	req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, want)
	deadline := time.Now().Add(readyTimeout)
	for {
		var last string
		info, err := StreamInfo(context.Background(), js, stream)
		switch {
		case err != nil:
			last = err.Error()
		case info.Cluster != nil && info.Cluster.Leader == want:
			return
		default:
			last = "no leader"
			if info.Cluster != nil && info.Cluster.Leader != "" {
				last = "led by " + info.Cluster.Leader
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(req)); err != nil {
				last += "; step down: " + err.Error()
			}
			cancel()
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natscluster: %s not led by %s within %s: %s", stream, want, readyTimeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// StreamInfo asks once for the named stream's info and gives the answer 5 s. Only the
// stream's leader answers, so a request sent while its group elects a leader is never
// answered: a caller riding out a node kill asks again rather than wait longer.
func StreamInfo(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// refresh reads node i's address on the network.
func (c *Cluster) refresh(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	nd.ip = dockertest.Docker(c.t, "inspect", "--format",
		`{{(index .NetworkSettings.Networks "`+c.Network+`").IPAddress}}`, nd.container)
	if nd.ip == "" {
		c.t.Fatalf("natscluster: node %s has no address on %s", nd.alias, c.Network)
	}
}

// waitHealthy polls each node's /healthz until it answers 200.
func (c *Cluster) waitHealthy(nodes ...*node) {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for _, nd := range nodes {
		var last string
		for {
			resp, err := hc.Get("http://" + nd.ip + ":8222/healthz")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				out, errOut, _ := dockertest.DockerErr(context.Background(), "logs", "--tail", "20", nd.container)
				c.t.Fatalf("natscluster: node %s not healthy within %s: %s\n%s%s", nd.alias, readyTimeout, last, out, errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	hc.CloseIdleConnections()
}
