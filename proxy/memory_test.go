package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The memory a connection costs the proxy process, measured: n connections in one state
// through a real proxy on loopback, minus the same n connections made directly to a listener
// that holds them, divided by n. Clients and targets live in this process too; subtracting
// the direct run removes them. (Before a tunnel, that also removes the proxy's accepted
// connection, a few hundred bytes, which the direct run's listener holds as well.)
//
// "Live" is what a full collection keeps (HeapAlloc) plus goroutine stacks (StackInuse): the
// floor the process cannot go under. The GC's headroom on top of it is what the soft memory
// limit bounds (cmd/proxy).

// memScenario is one state n connections are brought to.
type memScenario struct {
	name string
	// viaProxy prepares a connection to the proxy; direct the same client's connection to the
	// target, for the baseline.
	viaProxy, direct func(t *testing.T, c net.Conn)
	stalled          bool // the target never reads and writes until it blocks
	writer           bool // the client then writes until it blocks, never reading
	budget           func(n int) float64
}

// memTarget is the tunnels' target on 127.0.0.1. It answers one 5-byte hello per connection
// with an echo and then holds the connection; a stalled target never reads and writes until
// its socket buffers are full.
type memTarget struct {
	ln      net.Listener
	stalled bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func startMemTarget(t testing.TB, stalled bool) *memTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &memTarget{ln: ln, stalled: stalled}
	m.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			m.mu.Lock()
			m.conns = append(m.conns, c)
			m.mu.Unlock()
			m.wg.Go(func() {
				if m.stalled {
					chunk := make([]byte, 64<<10)
					for {
						if _, err := c.Write(chunk); err != nil {
							return
						}
					}
				}
				b := make([]byte, 5)
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				_, _ = c.Write(b)
			})
		}
	})
	t.Cleanup(m.close)
	return m
}

func (m *memTarget) close() {
	m.ln.Close()
	m.closeConns()
	m.wg.Wait()
}

func (m *memTarget) closeConns() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.conns {
		c.Close()
	}
	m.conns = nil
}

// liveBytes collects fully and returns the live heap plus goroutine stacks.
func liveBytes() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// hold opens n connections to addr, prepares each, and returns a func that closes them.
func hold(t *testing.T, addr string, n int, prepare func(*testing.T, net.Conn), writer bool) func() {
	t.Helper()
	var (
		conns []net.Conn
		wg    sync.WaitGroup
	)
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		prepare(t, c)
		if writer {
			wg.Go(func() {
				chunk := make([]byte, 64<<10)
				for {
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			})
		}
	}
	// Let the proxy take in what was sent and, stalled, fill every socket buffer and block.
	time.Sleep(500 * time.Millisecond)
	return func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
}

func connectThrough(t *testing.T, c net.Conn) {
	if _, err := io.WriteString(c, "CONNECT mem.test:443 HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len(established)); got != established {
		t.Fatalf("answer %q", got)
	}
}

func hello(t *testing.T, c net.Conn) {
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, 5); got != "hello" {
		t.Fatalf("echo %q", got)
	}
}

// longHead is an unfinished request head just short of the 64 KiB limit.
var longHead = "CONNECT mem.test:443 HTTP/1.1\r\nX-Pad: " + strings.Repeat("a", 60<<10)

func sendLongHead(t *testing.T, c net.Conn) {
	if _, err := io.WriteString(c, longHead); err != nil {
		t.Fatal(err)
	}
}

// connCost returns the live bytes one connection of sc adds to the proxy process.
func connCost(t *testing.T, n int, sc memScenario) float64 {
	t.Helper()
	target := startMemTarget(t, sc.stalled)
	// A resolver whose server never answers: names other than mem.test stay in resolution.
	blackhole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blackhole.Close() })
	r := &slowResolver{stub: &stubResolver{answers: map[string][]netip.Addr{"mem.test": addrs("127.0.0.1")}},
		dns: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", blackhole.LocalAddr().String())
		}}}
	tp := startProxy(t, []string{"mem.test", "slow.test"}, WithResolver(r), withAdmitLoopback(),
		withDialPort(target.ln.Addr().(*net.TCPAddr).Port))

	base := liveBytes()
	closeDirect := hold(t, target.ln.Addr().String(), n, sc.direct, sc.writer)
	direct := liveBytes()
	closeDirect()
	target.closeConns()
	time.Sleep(200 * time.Millisecond)

	base2 := liveBytes()
	closeProxied := hold(t, tp.addr, n, sc.viaProxy, sc.writer)
	proxied := liveBytes()
	closeProxied()
	return (float64(proxied) - float64(base2) - (float64(direct) - float64(base))) / float64(n)
}

// slowResolver answers mem.test from a table and asks a DNS server that never answers for
// anything else.
type slowResolver struct {
	stub *stubResolver
	dns  *net.Resolver
}

func (r *slowResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host == "mem.test" {
		return r.stub.LookupNetIP(ctx, network, host)
	}
	return r.dns.LookupNetIP(ctx, network, host)
}

// TestConnectionMemory measures what a connection costs the proxy in each state a flood can
// hold it in, and holds the proxy to the budget its limits are computed from (proxy_opts.go):
// connBudget per connection, plus the copy buffers lent at that moment, which bufPool
// bounds. MAF_SANDBOX_PROXY_MEMORY_N sets the connection count (default 256).
func TestConnectionMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory with hundreds of connections")
	}
	n := 256
	if s := os.Getenv("MAF_SANDBOX_PROXY_MEMORY_N"); s != "" {
		if _, err := fmt.Sscan(s, &n); err != nil {
			t.Fatal(err)
		}
	}
	nothing := func(*testing.T, net.Conn) {}
	perConn := func(int) float64 { return connBudget * raceFactor }
	for _, sc := range []memScenario{
		{name: "unfinished 60 KiB heads", viaProxy: sendLongHead, direct: sendLongHead, budget: perConn},
		{name: "resolving", viaProxy: func(t *testing.T, c net.Conn) {
			if _, err := io.WriteString(c, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
		}, direct: nothing, budget: perConn},
		{name: "idle tunnels", viaProxy: func(t *testing.T, c net.Conn) { connectThrough(t, c); hello(t, c) },
			direct: hello, budget: perConn},
		{name: "stalled tunnels", viaProxy: connectThrough, direct: nothing, stalled: true, writer: true,
			budget: func(n int) float64 {
				// Both directions of every tunnel hold a buffer: the first largeBufs large.
				large := min(2*n, largeBufs)
				return connBudget*raceFactor + float64(large*copyBufSize+(2*n-large)*smallBufSize)/float64(n)
			}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			per, budget := connCost(t, n, sc), sc.budget(n)
			t.Logf("%s: %.1f KiB live per connection (n=%d), budget %.1f KiB", sc.name, per/1024, n, budget/1024)
			if per > budget {
				t.Errorf("%s cost %.1f KiB per connection, over the budget of %.1f KiB", sc.name, per/1024, budget/1024)
			}
		})
	}
}
