package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natscluster"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// The takeover tests run engines with placement on a 3-node NATS cluster over this machine's
// daemon, at the default lease: one daemon shared by several engines is itself a deployment
// (engines for availability over one host), and the one where a taker can adopt.

// placedEngine starts an engine in this process — the real Docker backend, its own router,
// service and placement store — whose NATS connections all go to url, recording daemon as its
// daemon's identity.
func placedEngine(t *testing.T, url, id, daemon string, connOpts []nats.Option) *service.Service {
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
	p, err := placement.New(itest.Context(t), js, id, placement.WithReplicas(3), placement.WithDaemon(daemon))
	if err != nil {
		t.Fatalf("placement %s: %v", id, err)
	}
	t.Cleanup(p.Close)
	router, err := sandbox.NewRouter([]sandbox.Backend{itest.NewBackend(t)}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
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
		_ = svc.Stop(ctx) // a cut engine's drain may not reach the server; it is abandoned
	})
	return svc
}

// clusterClient is a client on url, closed when the test ends.
func clusterClient(t *testing.T, url string, opts ...client.Option) *client.Backend {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(itest.Context(t), nc, append([]client.Option{client.WithRetryWait(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// engineReachable reports whether engine id answers its liveness subject from url.
func engineReachable(t *testing.T, url, id string) bool {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, err = nc.Request(messages.Engine(messages.SubjectEngineAliveT, messages.DefaultPrefix, id), nil, time.Second)
	return err == nil
}

// waitFor polls cond every 100 ms for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// takeOver acquires key through the pool until an engine other than the lapsed owner serves
// it (every refusal meanwhile must be engine_unavailable: the owner's lease has not lapsed),
// and returns the sandbox and how long that took.
func takeOver(t *testing.T, pool *client.Backend, key sandbox.Key, spec sandbox.Spec) (*client.Sandbox, time.Duration) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(time.Minute)
	for {
		sb, err := pool.Acquire(itest.Context(t), key, spec)
		if err == nil {
			return sb.(*client.Sandbox), time.Since(began)
		}
		if !errors.Is(err, messages.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("acquire while the owner's lease lapses: %v, want engine_unavailable until another engine takes over", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keyContainers lists the IDs of this run's containers of key's scope, stopped ones too.
func keyContainers(t *testing.T, key sandbox.Key) []string {
	t.Helper()
	return strings.Fields(dockertest.Docker(t, "ps", "-a", "-q", "--no-trunc", "--filter", "label="+label.Scope+"="+label.Value(key.Scope),
		"--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process()))
}

// containerState is the container's running and paused flags as the daemon reports them.
func containerState(t *testing.T, id string) string {
	t.Helper()
	return dockertest.Docker(t, "inspect", "--format", "running={{.State.Running}} paused={{.State.Paused}}", id)
}

// TestTakeoverAdoptsTheContainerOnItsDaemon: engine a (reaching the cluster only through a
// relay) acquires a key and writes a file; a is cut off; once its lease lapses engine b takes
// the sandbox over on the pool's next acquire. On the owner's daemon b adopts the container:
// the same instance, the file still there, one container. Recording another daemon, b treats
// this daemon's container of the name as an older tenure's and creates afresh: a new
// instance, no file, still one container. After the heal a serves the sandbox no more.
func TestTakeoverAdoptsTheContainerOnItsDaemon(t *testing.T) {
	c := natscluster.Run(t, 3)
	daemon := dockertest.Docker(t, "info", "--format", "{{.ID}}")
	for _, tc := range []struct {
		name, daemonB string
		adopt         bool
	}{
		{"same daemon", daemon, true},
		{"another daemon", "another-" + daemon, false},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			relay := natscluster.NewRelay(t, strings.TrimPrefix(c.URL(0), "nats://"))
			cutOpts := []nats.Option{nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
			idA, idB := "a-"+strings.Fields(tc.name)[0], "b-"+strings.Fields(tc.name)[0]
			placedEngine(t, relay.URL(), idA, daemon, cutOpts)
			placedEngine(t, c.URL(1), idB, tc.daemonB, nil)
			waitFor(t, "both engines reachable from node 3", func() bool {
				return engineReachable(t, c.URL(2), idA) && engineReachable(t, c.URL(2), idB)
			})
			key, spec := itest.NewKey(t), itest.FilesSpec(t)
			pool := clusterClient(t, c.URL(2))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if f := pool.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
					t.Errorf("dispose: %v", f)
				}
				if left := keyContainers(t, key); len(left) != 0 {
					t.Errorf("containers left after the dispose: %v", left)
				}
			})
			ctx := itest.Context(t)
			first, err := clusterClient(t, c.URL(2), client.WithEngine(idA)).Acquire(ctx, key, spec)
			if err != nil {
				t.Fatalf("acquire on a: %v", err)
			}
			if err := first.WriteFile(ctx, "note.txt", []byte("written through a"), "."); err != nil {
				t.Fatalf("write on a: %v", err)
			}

			relay.Cut()
			if _, err := first.StatFile(ctx, "note.txt", "."); !errors.Is(err, messages.ErrUnavailable) {
				t.Fatalf("a call on the cut engine: %v, want engine_unavailable", err)
			}
			sb, took := takeOver(t, pool, key, spec)
			t.Logf("cut → served by the taker: %s (lease %s, grace %s)", took.Round(10*time.Millisecond), placement.DefaultLease, placement.DefaultGrace)
			if sb.Engine() != idB {
				t.Fatalf("taken over by %s, want %s", sb.Engine(), idB)
			}
			got, rerr := sb.ReadFile(ctx, "note.txt", ".", 100)
			if tc.adopt {
				if sb.InstanceID() != first.InstanceID() {
					t.Fatalf("the taker serves instance %s, want the adopted %s", sb.InstanceID(), first.InstanceID())
				}
				if rerr != nil || string(got) != "written through a" {
					t.Fatalf("the adopted sandbox reads %q, %v; want the file a wrote", got, rerr)
				}
			} else {
				if sb.InstanceID() == first.InstanceID() {
					t.Fatalf("the taker from another daemon served this daemon's older container %s", first.InstanceID())
				}
				if !errors.Is(rerr, fs.ErrNotExist) {
					t.Fatalf("the fresh sandbox reads %q, %v; want not found", got, rerr)
				}
			}
			if ids := keyContainers(t, key); len(ids) != 1 || ids[0] != sb.InstanceID() {
				t.Fatalf("containers of the key %v, want only %s", ids, sb.InstanceID())
			}

			relay.Heal()
			waitFor(t, "a back after the heal, its renewal refused and its handle dropped", func() bool {
				if !engineReachable(t, c.URL(2), idA) {
					return false
				}
				h, err := clusterClient(t, c.URL(2), client.WithEngine(idA)).Health(ctx)
				return err == nil && h.Sandboxes == 0
			})
			if _, err := first.StatFile(ctx, "note.txt", "."); err == nil {
				t.Fatalf("the cut engine served the taken-over sandbox after the heal")
			}
			if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
				t.Fatalf("the taker serves the sandbox after the heal: %v", err)
			}
		})
	}
}

// Engines as processes for the freeze test: "engine serve --placement" on a cluster node.

// clusterServe runs "engine serve --placement" with the ID id on the cluster node url, on the
// archive file plane, env added to the test's environment; it returns the process and its log.
func clusterServe(t *testing.T, bin, url, id string, env ...string) (*os.Process, *itest.LogBuffer) {
	t.Helper()
	s := itest.Serve(t, bin, append([]string{actors.FilePlaneEnv + "=" + string(actors.FilePlaneArchive)}, env...),
		"--nats-url", url, "--placement", "--placement-replicas", "3", "--engine-id", id, "--data-dir", filepath.Join(t.TempDir(), "data"))
	return s.Process, s.Log
}

// holdProxy forwards a unix socket to the daemon's until armed; from then on the first archive
// upload (PUT …/archive) it sees never reaches the daemon: the writer waits for an answer
// with the container frozen, as long as the test likes. held is closed when that happens.
type holdProxy struct {
	path  string
	held  chan struct{}
	ln    net.Listener
	mu    sync.Mutex
	armed bool
	once  sync.Once
	conns []net.Conn
	wg    sync.WaitGroup
}

func newHoldProxy(t *testing.T) *holdProxy {
	t.Helper()
	upstream := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		var ok bool
		if upstream, ok = strings.CutPrefix(h, "unix://"); !ok {
			t.Fatalf("the freeze test proxies a unix socket; DOCKER_HOST is %s", h)
		}
	}
	p := &holdProxy{path: filepath.Join(t.TempDir(), "d.sock"), held: make(chan struct{})}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("unix", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			itest.Relay(&p.wg, c, d, p.upload)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

func (p *holdProxy) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// upload copies the client's bytes to the daemon until, armed, it meets an archive upload:
// what precedes the upload's request line goes through, the rest is swallowed.
func (p *holdProxy) upload(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		chunk := buf[:n]
		p.mu.Lock()
		armed := p.armed
		p.mu.Unlock()
		if i := bytes.Index(chunk, []byte("PUT /")); armed && i >= 0 && bytes.Contains(chunk[i:], []byte("/archive")) {
			_, _ = dst.Write(chunk[:i])
			p.once.Do(func() { close(p.held) })
			_, _ = io.Copy(io.Discard, src)
			return
		}
		if _, werr := dst.Write(chunk); werr != nil || err != nil {
			return
		}
	}
}

// Close drops every connection.
func (p *holdProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// heldWrite acquires key on engine (from node 3), writes note.txt ("written through
// <engine>"), then starts a write whose upload proxy holds, and returns the sandbox and its
// instance once the container is frozen under that write. When the test ends the write is cancelled
// and awaited, then the key's sandbox is disposed through pool and no container of it may be
// left.
func heldWrite(t *testing.T, c *natscluster.Cluster, pool *client.Backend, engine string, proxy *holdProxy, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := pool.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose: %v", f)
		}
		if left := keyContainers(t, key); len(left) != 0 {
			t.Errorf("containers left after the dispose: %v", left)
		}
	})
	ctx := itest.Context(t)
	first, err := clusterClient(t, c.URL(2), client.WithEngine(engine)).Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire on %s: %v", engine, err)
	}
	if err := first.WriteFile(ctx, "note.txt", []byte("written through "+engine), "."); err != nil {
		t.Fatalf("write on %s: %v", engine, err)
	}
	id := first.InstanceID()

	proxy.arm()
	wctx, cancelWrite := context.WithCancel(context.Background())
	wrote := make(chan error, 1)
	go func() { wrote <- first.WriteFile(wctx, "big.bin", bytes.Repeat([]byte("x"), 1<<20), ".") }()
	t.Cleanup(func() { cancelWrite(); <-wrote })
	select {
	case <-proxy.held:
	case err := <-wrote:
		t.Fatalf("the write ended before its upload was held: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the write's upload never reached the proxy")
	}
	if st := containerState(t, id); st != "running=true paused=true" {
		t.Fatalf("during the held write the container is %s, want frozen", st)
	}
	return first, id
}

// TestTakeoverThawsTheFreezeItsDeadOwnerLeft: engine a, an `engine serve --placement` process
// on the archive file plane, is killed (SIGKILL) in the middle of a write, holding the
// container frozen — its daemon connection runs through a proxy that swallows the archive
// upload, so the write waits frozen for as long as the test needs. The container stays paused
// after the kill. Engine b, another process on the same daemon, takes the sandbox over once
// a's lease lapses; its acquire thaws the container (it is the owner now, and no freeze of
// its own is on it) and serves calls: the same instance, the file written before still
// there, the container running, one container for the key.
func TestTakeoverThawsTheFreezeItsDeadOwnerLeft(t *testing.T) {
	c := natscluster.Run(t, 3)
	bin := itest.BuildEngine(t)
	proxy := newHoldProxy(t)
	a, _ := clusterServe(t, bin, c.URL(0), "fa", "DOCKER_HOST=unix://"+proxy.path)
	_, logB := clusterServe(t, bin, c.URL(1), "fb")
	waitFor(t, "both engines reachable from node 3", func() bool {
		return engineReachable(t, c.URL(2), "fa") && engineReachable(t, c.URL(2), "fb")
	})
	key, spec := itest.NewKey(t), itest.FilesSpec(t)
	pool := clusterClient(t, c.URL(2))
	_, id := heldWrite(t, c, pool, "fa", proxy, key, spec)
	ctx := itest.Context(t)
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill fa: %v", err)
	}
	proxy.Close()
	if st := containerState(t, id); st != "running=true paused=true" {
		t.Fatalf("after fa was killed the container is %s, want still frozen", st)
	}

	sb, took := takeOver(t, pool, key, spec)
	t.Logf("kill → served by the taker: %s (lease %s, grace %s)", took.Round(10*time.Millisecond), placement.DefaultLease, placement.DefaultGrace)
	assertAdopted(t, sb, "fa", "fb", id, key)
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("exec on the taker: %v", err)
	}
	if st := containerState(t, id); st != "running=true paused=false" {
		t.Fatalf("after the takeover the container is %s, want running", st)
	}
	if !strings.Contains(logB.String(), "thawed before reuse") {
		t.Fatalf("fb's log does not say it thawed the container")
	}
}

// assertAdopted checks a takeover's outcome: the taker serves the container the dead or cut
// owner held — the same instance, the file written through the owner still there — and it
// is the key's only container.
func assertAdopted(t *testing.T, sb *client.Sandbox, owner, taker, id string, key sandbox.Key) {
	t.Helper()
	if sb.Engine() != taker || sb.InstanceID() != id {
		t.Fatalf("taken over by %s with instance %s, want %s adopting %s", sb.Engine(), sb.InstanceID(), taker, id)
	}
	if got, err := sb.ReadFile(itest.Context(t), "note.txt", ".", 100); err != nil || string(got) != "written through "+owner {
		t.Fatalf("the taker reads %q, %v; want the file %s wrote", got, err, owner)
	}
	if ids := keyContainers(t, key); len(ids) != 1 || ids[0] != id {
		t.Fatalf("containers of the key %v, want only %s", ids, id)
	}
}

// TestTakeoverAfterACutOwnerLiftedItsFreeze: engine a, an `engine serve --placement` process
// reaching the cluster only through a relay, is cut off in the middle of a write, holding the
// container frozen (its daemon connection swallows the upload, as above). Its lease's fence
// ends the write at the lease's expiry and a itself thaws the container — before any taker
// may claim it, so only the owner ever froze or thawed it. Then b takes over and adopts the
// running container (its log never says it thawed one); after the heal a serves it no more.
func TestTakeoverAfterACutOwnerLiftedItsFreeze(t *testing.T) {
	c := natscluster.Run(t, 3, natscluster.WithNoAdvertise()) // a's client cannot go around the relay
	bin := itest.BuildEngine(t)
	proxy := newHoldProxy(t)
	relay := natscluster.NewRelay(t, strings.TrimPrefix(c.URL(0), "nats://"))
	_, logA := clusterServe(t, bin, relay.URL(), "ca", "DOCKER_HOST=unix://"+proxy.path, "MAF_SANDBOX_LOG_LEVEL=debug")
	_, logB := clusterServe(t, bin, c.URL(1), "cb")
	waitFor(t, "both engines reachable from node 3", func() bool {
		return engineReachable(t, c.URL(2), "ca") && engineReachable(t, c.URL(2), "cb")
	})
	key, spec := itest.NewKey(t), itest.FilesSpec(t)
	pool := clusterClient(t, c.URL(2))
	first, id := heldWrite(t, c, pool, "ca", proxy, key, spec)
	ctx := itest.Context(t)
	relay.Cut()
	cut := time.Now()
	// Nothing asks cb for the key until the container runs again: whoever thawed it was ca.
	waitFor(t, "ca's fence ends the write and ca thaws the container", func() bool {
		return containerState(t, id) == "running=true paused=false"
	})
	t.Logf("cut → the cut owner thawed: %s (lease %s)", time.Since(cut).Round(10*time.Millisecond), placement.DefaultLease)
	// The fence ended the write, not the upload's own timeout.
	waitFor(t, "ca's log answers the write with the fence's refusal", func() bool {
		return strings.Contains(logA.String(), "lease on the sandbox ended during the call")
	})

	sb, _ := takeOver(t, pool, key, spec)
	t.Logf("cut → served by the taker: %s (lease %s, grace %s)", time.Since(cut).Round(10*time.Millisecond), placement.DefaultLease, placement.DefaultGrace)
	assertAdopted(t, sb, "ca", "cb", id, key)
	if strings.Contains(logB.String(), "thawed before reuse") {
		t.Fatalf("cb thawed the container: the cut owner's freeze outlived its lease")
	}

	relay.Heal()
	waitFor(t, "ca back after the heal, its renewal refused and its handle dropped", func() bool {
		if !engineReachable(t, c.URL(2), "ca") {
			return false
		}
		h, err := clusterClient(t, c.URL(2), client.WithEngine("ca")).Health(ctx)
		return err == nil && h.Sandboxes == 0
	})
	if _, err := first.StatFile(ctx, "note.txt", "."); err == nil {
		t.Fatalf("the cut engine served the taken-over sandbox after the heal")
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("the taker serves the sandbox after the heal: %v", err)
	}
}
