package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/proxy"
)

// The proxy flood: a hostile sandbox opens as many connections as its proxy admits and more,
// against the real proxy image in a container with the engine's limits (egress-and-reap.md
// §1.5: --memory 64m, --pids-limit 64). The proxy must not be OOM-killed — that would lose its
// decision log and cut every tunnel — must answer the connections over its cap with a 503
// rather than leave them hanging, and must serve a fresh tunnel afterwards.
//
// The test process is the sandbox: it dials the proxy's address on a private, internal test
// network, on which the only other container is the project's HTTPS target under its own
// alias. Nothing leaves that network: it has no route out, no container forwards DNS
// (--dns 127.0.0.1), and the allowlist names only the target.
const (
	floodSubnet = "10.215.0.0/24"
	floodHost   = "flood.maf-e2e.example"
	// floodHeadBytes is what each connection of the head flood sends: a request head just
	// short of the proxy's 64 KiB limit, never finished.
	floodHeadBytes = 60 << 10
	// floodOver is how many connections over the cap each flood makes at once: as many as
	// the proxy lingers over (its overflowSlots), so that each one can read its 503.
	floodOver = 64
	// floodRefusal is the proxy's answer over its cap.
	floodRefusal = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"
)

func TestProxyFlood(t *testing.T) {
	dockertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	for _, err := range []error{images.EnsureProxy(ctx, "docker", images.ProxyTag), images.EnsureTarget(ctx, "docker")} {
		if err != nil {
			t.Fatalf("build images: %v", err)
		}
	}
	network := "maf-e2e-flood-" + randomHex(t)
	newTestNetwork(t, network, "--internal", "--subnet", floodSubnet)

	caPEM, certPEM, keyPEM := testCA(t, floodHost)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	dockertest.RunContainer(t, images.TargetTag, "--network", network, "--network-alias", floodHost, "--dns", "127.0.0.1",
		"--user", "0", "-e", "E2E_CERT="+string(certPEM), "-e", "E2E_KEY="+string(keyPEM))
	id := floodProxy(t, network)
	fc := &floodClient{id: id, roots: roots, addr: net.JoinHostPort(strings.TrimSpace(dockertest.Docker(t, "inspect", "--format",
		`{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, id)), "3128")}
	fc.checkAlive(t, "before the floods")
	if err := fc.tunnel(); err != nil {
		t.Fatalf("a tunnel before the floods: %v", err)
	}
	settle()

	// The head flood: every slot held by a connection still sending its head, each one as
	// long as the proxy must accept.
	if !t.Run("heads", func(t *testing.T) {
		conns := fc.open(t, proxy.MaxConns, func(c net.Conn) error {
			_, err := io.WriteString(c, "CONNECT "+floodHost+":443 HTTP/1.1\r\nX-Pad: "+strings.Repeat("a", floodHeadBytes))
			return err
		})
		defer closeAll(conns)
		fc.overCap(t)
		fc.checkAlive(t, fmt.Sprintf("%d unfinished heads of %d KiB", len(conns), floodHeadBytes>>10))
		unanswered(t, conns)
	}) {
		t.FailNow()
	}
	settle()

	// The tunnel flood: every slot a TLS tunnel to the allowed target that has carried one
	// request and is held open.
	if !t.Run("tunnels", func(t *testing.T) {
		tunnels := fc.open(t, proxy.MaxConns, fc.handshake)
		defer closeAll(tunnels)
		fc.overCap(t)
		fc.checkAlive(t, fmt.Sprintf("%d open tunnels", len(tunnels)))
	}) {
		t.FailNow()
	}
	settle()

	if err := fc.tunnel(); err != nil {
		t.Fatalf("a tunnel after the floods: %v", err)
	}
	fc.checkAlive(t, "after the floods")
	// The decision log is whole: one ALLOW per tunnel (the flood's and two single ones).
	logs := dockertest.Docker(t, "logs", id)
	if n := strings.Count(logs, "ALLOW "+floodHost+":443"); n != proxy.MaxConns+2 {
		t.Fatalf("the decision log holds %d ALLOW lines, want %d", n, proxy.MaxConns+2)
	}
}

// settle waits for the proxy to finish with connections the client closed: it lingers at
// most a second over one it refuses.
func settle() { time.Sleep(2 * time.Second) }

// unanswered checks that the proxy has answered none of conns: none was refused for want of a
// slot, and none has reached its head timeout.
func unanswered(t *testing.T, conns []net.Conn) {
	t.Helper()
	var wg sync.WaitGroup
	var answered atomic.Int32
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	if n := answered.Load(); n > 0 {
		t.Fatalf("%d of %d unfinished heads were answered or closed", n, len(conns))
	}
}

// floodProxy creates the proxy through the engine's own driver (docker.Networks.ProxyCreate:
// read-only, no capabilities, no new privileges, the pids, memory and user limits, bounded
// json-file logs, never pulled), so the flood meets exactly the limits the engine sets, on
// network only, allowing the target and the test subnet; it waits for the readiness line.
// Its removal is registered first.
func floodProxy(t *testing.T, network string) string {
	t.Helper()
	eng, err := docker.NewEngine(docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var nets docker.Networks = eng
	name := "maf-e2e-flood-proxy-" + randomHex(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := dockertest.DockerErr(ctx, "rm", "--force", name); err != nil && !strings.Contains(err.Error(), "No such container") {
			t.Errorf("remove proxy: %v", err)
		}
	})
	ctx := itest.Context(t)
	id, err := nets.ProxyCreate(ctx, docker.ProxySpec{Name: name, Image: images.ProxyTag, Network: network,
		Env: []string{egresslog.EnvAllow + "=" + floodHost, egresslog.EnvPrivateCIDRs + "=" + floodSubnet}})
	if err != nil {
		t.Fatalf("create the proxy as the engine does: %v", err)
	}
	if err := nets.ProxyStart(ctx, id); err != nil {
		t.Fatalf("start the proxy: %v", err)
	}
	for range 40 {
		if strings.Contains(dockertest.Docker(t, "logs", id), egresslog.ReadyMarker) {
			return id
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("proxy never reported listening; state %s", dockertest.Docker(t, "inspect", "--format", "{{json .State}}", id))
	return ""
}

// floodPad is a request header as long as a few of the proxy's copy buffers.
var floodPad = strings.Repeat("p", 96<<10)

// floodClient is the hostile sandbox: it dials the proxy container id at addr.
type floodClient struct {
	id    string
	addr  string
	roots *x509.CertPool
}

// dial connects to the proxy with a deadline for the whole conversation that follows.
func (fc *floodClient) dial() (net.Conn, error) {
	c, err := net.DialTimeout("tcp", fc.addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	return c, nil
}

// handshake turns c into a TLS tunnel to the target through the proxy and carries one
// request over it, leaving the connection open (the target keeps it alive).
func (fc *floodClient) handshake(c net.Conn) error {
	if _, err := io.WriteString(c, "CONNECT "+floodHost+":443 HTTP/1.1\r\nHost: "+floodHost+":443\r\n\r\n"); err != nil {
		return err
	}
	answer := make([]byte, len("HTTP/1.1 200 Connection Established\r\n\r\n"))
	if _, err := io.ReadFull(c, answer); err != nil {
		return fmt.Errorf("CONNECT answer: %w (got %q)", err, answer)
	}
	if string(answer) != "HTTP/1.1 200 Connection Established\r\n\r\n" {
		return fmt.Errorf("CONNECT answered %q", answer)
	}
	tc := tls.Client(c, &tls.Config{ServerName: floodHost, RootCAs: fc.roots, MinVersion: tls.VersionTLS12})
	// The padding fills the proxy's copy buffers, as a real upload would.
	if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+floodHost+"\r\nX-Pad: "+floodPad+"\r\n\r\n"); err != nil {
		return fmt.Errorf("TLS through the tunnel: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return fmt.Errorf("response through the tunnel: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The target answers "ok", then echoes the request's headers (the padding among them).
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "ok\n") {
		return fmt.Errorf("response through the tunnel: %s %q %v", resp.Status, body, err)
	}
	return nil
}

// tunnel opens one tunnel, carries one request and closes it.
func (fc *floodClient) tunnel() error {
	c, err := fc.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return fc.handshake(c)
}

// open makes n connections, 32 at a time, and brings each into its state with prepare. Unless
// every one got there, it closes them, checks whether the proxy is alive and fails the test.
func (fc *floodClient) open(t *testing.T, n int, prepare func(net.Conn) error) []net.Conn {
	t.Helper()
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed atomic.Int32
		first  error
		wg     sync.WaitGroup
		next   atomic.Int32
	)
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for failed.Load() == 0 && next.Add(1) <= int32(n) {
				c, err := fc.dial()
				if err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
					err = prepare(c)
				}
				if err != nil && failed.Add(1) == 1 {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		closeAll(conns)
		fc.checkAlive(t, "failed connections")
		t.Fatalf("%d of %d connections failed; the first: %v", f, n, first)
	}
	t.Logf("opened %d connections in %v", n, time.Since(start).Round(time.Millisecond))
	return conns
}

// overCap checks that, with every slot taken, further connections are answered 503 at once,
// both when they have sent a request and when they say nothing.
func (fc *floodClient) overCap(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 2*floodOver)
	for i := range 2 * floodOver {
		wg.Go(func() {
			c, err := fc.dial()
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if i%2 == 0 {
				if _, err := io.WriteString(c, "CONNECT "+floodHost+":443 HTTP/1.1\r\n\r\n"); err != nil {
					errs <- err
					return
				}
			}
			got, err := io.ReadAll(c)
			if string(got) != floodRefusal {
				errs <- fmt.Errorf("over the cap: got %q, %v; want the 503", got, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkAlive fails the test when the proxy container was OOM-killed or is not running, and
// logs its memory use.
func (fc *floodClient) checkAlive(t *testing.T, when string) {
	t.Helper()
	state := strings.Fields(dockertest.Docker(t, "inspect", "--format", "{{.State.OOMKilled}} {{.State.Running}} {{.State.ExitCode}}", fc.id))
	mem := strings.TrimSpace(dockertest.Docker(t, "stats", "--no-stream", "--format", "{{.MemUsage}}", fc.id))
	t.Logf("proxy with %s: memory %s, state (OOMKilled Running ExitCode) %v", when, mem, state)
	if len(state) != 3 || state[0] != "false" || state[1] != "true" {
		t.Fatalf("proxy with %s: OOMKilled Running ExitCode = %v", when, state)
	}
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}
