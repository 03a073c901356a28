package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Test-only options. They live in a test file, so the shipped proxy cannot set them: the
// production policy never admits loopback, and the dial port is always the requested one.

// withAdmitLoopback lets the policy dial 127.0.0.1, where the tests' targets listen.
func withAdmitLoopback() Option {
	return func(o *options) error { o.admitLoopback = true; return nil }
}

// withDialPort dials port instead of the requested 443, where a test target listens.
func withDialPort(port int) Option {
	return func(o *options) error { o.dialPort = port; return nil }
}

// withLoopbackOnlyGuard refuses, and fails the test on, any dial off loopback that the
// policy let through: whatever the code under test does, a test never sends a SYN anywhere
// but 127.0.0.1.
func withLoopbackOnlyGuard(t testing.TB) Option {
	return func(o *options) error {
		o.dialGuard = func(a netip.Addr) error {
			if !a.Unmap().IsLoopback() {
				t.Errorf("the proxy tried to dial %s", a)
				return errors.New("test guard: not loopback")
			}
			return nil
		}
		return nil
	}
}

func withHeadTimeout(d time.Duration) Option {
	return func(o *options) error { o.headTimeout = d; return nil }
}

func withDialTimeout(d time.Duration) Option {
	return func(o *options) error { o.dialTimeout = d; return nil }
}

func withIdleTimeout(d time.Duration) Option {
	return func(o *options) error { o.idleTimeout = d; return nil }
}

func withMaxConns(n int) Option {
	return func(o *options) error { o.maxConns = n; return nil }
}

// withLargeBufs bounds the large copy buffers lent at once to n instead of largeBufs.
func withLargeBufs(n int) Option {
	return func(o *options) error { o.largeBufs = n; return nil }
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stubResolver answers from a table and counts lookups; it never touches DNS.
type stubResolver struct {
	answers map[string][]netip.Addr
	delay   time.Duration
	lookups atomic.Int32
}

func (r *stubResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if a, ok := r.answers[strings.ToLower(host)]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// echoServer is a TLS-less TCP target on 127.0.0.1: it echoes what it reads and half-closes
// at EOF. It counts the connections it accepted.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Go(func() {
				_, _ = io.Copy(c, c)
				_ = c.(*net.TCPConn).CloseWrite()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) port() int { return e.ln.Addr().(*net.TCPAddr).Port }

// testProxy is a proxy serving on 127.0.0.1 with its decision log in memory.
type testProxy struct {
	*Proxy
	addr string
	log  *syncBuffer
}

func startProxy(t *testing.T, allow []string, opts ...Option) *testProxy {
	t.Helper()
	log := &syncBuffer{}
	p, err := New(allow, append([]Option{WithDecisionLog(log), withLoopbackOnlyGuard(t)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testProxy{Proxy: p, addr: ln.Addr().String(), log: log}
}

// dial opens a client connection to the proxy with an overall deadline.
func (tp *testProxy) dial(t *testing.T) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tp.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.(*net.TCPConn)
}

// exchange sends req, half-closes, and returns everything the proxy sent until it closed.
func (tp *testProxy) exchange(t *testing.T, req string) string {
	t.Helper()
	c := tp.dial(t)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after %q: %v (got %q)", req, err, got)
	}
	return string(got)
}

// readN reads exactly n bytes from c.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: %v (got %q)", n, err, buf)
	}
	return string(buf)
}
