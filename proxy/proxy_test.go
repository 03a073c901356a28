package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const established = "HTTP/1.1 200 Connection Established\r\n\r\n"

// loopbackTarget returns the options that let the proxy reach the echo target: the stub
// resolver's names answer 127.0.0.1, loopback is admitted (tests only) and the dial goes to
// the echo port instead of 443.
func loopbackTarget(echo *echoServer, answers map[string][]string) []Option {
	r := &stubResolver{answers: map[string][]netip.Addr{}}
	for name, as := range answers {
		r.answers[name] = addrs(as...)
	}
	return []Option{WithResolver(r), withAdmitLoopback(), withDialPort(echo.port())}
}

func TestTunnelCarriesPipelinedBytes(t *testing.T) {
	echo := startEcho(t)
	tp := startProxy(t, []string{"echo.test"}, loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}})...)

	c := tp.dial(t)
	// One write: the head and a ClientHello-like payload behind it, as a fast client sends.
	if _, err := io.WriteString(c, "CONNECT Echo.Test:443 HTTP/1.1\r\nHost: Echo.Test:443\r\n\r\n\x16\x03\x01pipelined"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len(established)); got != established {
		t.Fatalf("answer %q", got)
	}
	if got := readN(t, c, 12); got != "\x16\x03\x01pipelined" {
		t.Fatalf("pipelined bytes came back as %q", got)
	}
	big := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB, several buffers
	go func() {
		_, _ = io.WriteString(c, big)
		_ = c.CloseWrite()
	}()
	rest, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != big {
		t.Fatalf("echoed %d bytes, want %d", len(rest), len(big))
	}
	if got := tp.log.String(); got != "ALLOW Echo.Test:443\n" {
		t.Fatalf("log %q", got)
	}
}

func TestRefusals(t *testing.T) {
	echo := startEcho(t)
	r := &stubResolver{answers: map[string][]netip.Addr{
		"echo.test":     addrs("127.0.0.1"),
		"internal.test": addrs("127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "fe80::1"),
		"metadata.test": addrs("169.254.169.254"),
	}}
	// "[[]::1]" is how fnmatch spells the literal "[::1]": a bracket opens a class.
	allow := []string{"echo.test", "internal.test", "metadata.test", "*.wild.test", "gone.test", "127.0.0.1", "[[]::1]", "::1", "10.9.9.9"}
	// Production policy (no loopback), so every loopback answer is refused.
	tp := startProxy(t, allow, WithResolver(r), withDialPort(echo.port()))

	cases := []struct {
		name    string
		req     string
		want    string
		wantLog string
	}{
		{name: "denied host", req: "CONNECT evil.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY evil.test:443\n"},
		{name: "denied host keeps its case", req: "CONNECT Evil.TEST:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY Evil.TEST:443\n"},
		{name: "wildcard does not cover the apex", req: "CONNECT wild.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY wild.test:443\n"},
		{name: "allowed host, other port", req: "CONNECT echo.test:80 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY echo.test:80\n"},
		{name: "loopback answer", req: "CONNECT echo.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL echo.test:443\n"},
		{name: "every answer non-global", req: "CONNECT internal.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL internal.test:443\n"},
		{name: "metadata", req: "CONNECT metadata.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL metadata.test:443\n"},
		{name: "loopback literal", req: "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL 127.0.0.1:443\n"},
		{name: "bracketed v6 literal", req: "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL [::1]:443\n"},
		{name: "bare v6 literal", req: "CONNECT ::1:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL ::1:443\n"},
		{name: "private literal", req: "CONNECT 10.9.9.9:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY-NONGLOBAL 10.9.9.9:443\n"},
		{name: "resolution fails", req: "CONNECT gone.test:443 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n", wantLog: "UNREACHABLE gone.test:443\n"},
		{name: "plain HTTP through the proxy", req: "GET http://echo.test/ HTTP/1.1\r\nHost: echo.test\r\n\r\n", want: "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n"},
		{name: "malformed", req: "CONNECT echo.test HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"},
		{name: "port out of range", req: "CONNECT echo.test:65536 HTTP/1.1\r\n\r\n", want: "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"},
		{name: "EOF before the head ends", req: "CONNECT echo.test:443 HTTP/1.1\r\n", want: "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"},
		{name: "denied with pipelined bytes", req: "CONNECT evil.test:443 HTTP/1.1\r\n\r\n" + strings.Repeat("\x16", 32<<10), want: "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", wantLog: "DENY evil.test:443\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tp.log.String()
			c := tp.dial(t)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(tc.req, "HTTP/1.1\r\n") {
				_ = c.CloseWrite()
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v (got %q)", err, got)
			}
			if string(got) != tc.want {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
			if logged := strings.TrimPrefix(tp.log.String(), before); logged != tc.wantLog {
				t.Fatalf("logged %q, want %q", logged, tc.wantLog)
			}
		})
	}
	if n := echo.accepted.Load(); n != 0 {
		t.Fatalf("the loopback target was reached %d times", n)
	}
}

// TestNonGlobalRefusedBeforeSYN proves the refusal sits inside the dialer: the Control hook
// refuses the exact address before connect(2), so a listener on it never sees a connection.
func TestNonGlobalRefusedBeforeSYN(t *testing.T) {
	echo := startEcho(t)
	p, err := New(nil, WithDecisionLog(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d := net.Dialer{ControlContext: p.control, Timeout: 2 * time.Second}
	for _, addr := range []string{
		echo.ln.Addr().String(),
		fmt.Sprintf("[::ffff:127.0.0.1]:%d", echo.port()),
	} {
		c, err := d.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dialled %s", addr)
		}
		if !errors.Is(err, errRefusedAddress) {
			t.Fatalf("dial %s: %v, want the control refusal", addr, err)
		}
	}
	// A metadata address is refused by the same hook (nothing is dialled: the hook runs
	// first).
	for _, addr := range []string{"169.254.169.254:443", "10.0.0.1:443", "[fe80::1%1]:443"} {
		if err := p.control(t.Context(), "tcp", addr, nil); !errors.Is(err, errRefusedAddress) {
			t.Fatalf("control(%s) = %v", addr, err)
		}
	}
	if n := echo.accepted.Load(); n != 0 {
		t.Fatalf("listener accepted %d connections", n)
	}
}

// TestMixedAnswersDialOnlyPermitted: with a private and a permitted answer, the proxy dials
// only the permitted one (the private one is never tried, so no traffic leaves loopback).
func TestMixedAnswersDialOnlyPermitted(t *testing.T) {
	echo := startEcho(t)
	tp := startProxy(t, []string{"mixed.test"}, loopbackTarget(echo, map[string][]string{"mixed.test": {"10.1.2.3", "169.254.169.254", "127.0.0.1"}})...)
	got := tp.exchange(t, "CONNECT mixed.test:443 HTTP/1.1\r\n\r\n")
	if !strings.HasPrefix(got, established) {
		t.Fatalf("answer %q", got)
	}
	if l := tp.log.String(); l != "ALLOW mixed.test:443\n" {
		t.Fatalf("log %q", l)
	}
}

func TestUnreachable(t *testing.T) {
	// A loopback port nothing listens on: the dial is permitted (test hook) and refused by the
	// kernel.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	r := &stubResolver{answers: map[string][]netip.Addr{"down.test": addrs("127.0.0.1")}, delay: 0}
	tp := startProxy(t, []string{"down.test", "slow.test"}, WithResolver(r), withAdmitLoopback(), withDialPort(closedPort))
	if got := tp.exchange(t, "CONNECT down.test:443 HTTP/1.1\r\n\r\n"); got != "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("answer %q", got)
	}
	if l := tp.log.String(); l != "UNREACHABLE down.test:443\n" {
		t.Fatalf("log %q", l)
	}

	// A resolution that outlives the dial timeout is UNREACHABLE too, on time.
	slow := &stubResolver{answers: map[string][]netip.Addr{"slow.test": addrs("127.0.0.1")}, delay: time.Minute}
	tp2 := startProxy(t, []string{"slow.test"}, WithResolver(slow), withAdmitLoopback(), withDialTimeout(200*time.Millisecond))
	start := time.Now()
	if got := tp2.exchange(t, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n"); got != "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("answer %q", got)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
	if l := tp2.log.String(); l != "UNREACHABLE slow.test:443\n" {
		t.Fatalf("log %q", l)
	}
}

// TestSlowlorisClosedByDeadline: a client that trickles its head never gets past the head
// deadline, whatever it keeps sending.
func TestSlowlorisClosedByDeadline(t *testing.T) {
	tp := startProxy(t, []string{"a.test"}, withHeadTimeout(300*time.Millisecond))
	c := tp.dial(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, b := range []byte("CONNECT a.test:443 HTTP/1.1\r\nX-Slow: ") {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
		}
	})
	start := time.Now()
	got, _ := io.ReadAll(c)
	close(stop)
	wg.Wait()
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("closed after %v", el)
	}
	if string(got) != "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("answer %q", got)
	}
	if l := tp.log.String(); l != "" {
		t.Fatalf("logged %q", l)
	}

	// A silent client is answered too.
	c2 := tp.dial(t)
	if got, _ := io.ReadAll(c2); string(got) != "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("silent client: %q", got)
	}
}

func TestHeadTooLong(t *testing.T) {
	tp := startProxy(t, []string{"a.test"})
	got := tp.exchange(t, "CONNECT a.test:443 HTTP/1.1\r\nX: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
	if got != "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("answer %q", got)
	}
}

func TestConnectionCap(t *testing.T) {
	tp := startProxy(t, []string{"a.test"}, withMaxConns(2))
	// Two connections that say nothing hold both slots.
	held := []*net.TCPConn{tp.dial(t), tp.dial(t)}
	time.Sleep(100 * time.Millisecond) // let both be accepted
	got := tp.exchange(t, "CONNECT a.test:443 HTTP/1.1\r\n\r\n")
	if got != "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n" {
		t.Fatalf("answer %q", got)
	}
	for _, c := range held {
		c.Close()
	}
	if l := tp.log.String(); l != "" {
		t.Fatalf("logged %q", l)
	}
}

func TestIdleTunnelClosed(t *testing.T) {
	echo := startEcho(t)
	opts := append(loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}}), withIdleTimeout(300*time.Millisecond))
	tp := startProxy(t, []string{"echo.test"}, opts...)
	c := tp.dial(t)
	if _, err := io.WriteString(c, "CONNECT echo.test:443 HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	readN(t, c, len(established))
	// Progress in one direction keeps the tunnel open past the idle time.
	for range 4 {
		time.Sleep(150 * time.Millisecond)
		if _, err := io.WriteString(c, "x"); err != nil {
			t.Fatal(err)
		}
		readN(t, c, 1)
	}
	start := time.Now()
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after idling: %q %v", rest, err)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 3*time.Second {
		t.Fatalf("closed after %v idle", el)
	}
}

func TestCloseCutsTunnels(t *testing.T) {
	echo := startEcho(t)
	tp := startProxy(t, []string{"echo.test"}, loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}})...)
	var cs []*net.TCPConn
	for range 5 {
		c := tp.dial(t)
		if _, err := io.WriteString(c, "CONNECT echo.test:443 HTTP/1.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		readN(t, c, len(established))
		cs = append(cs, c)
	}
	// One more client stuck in its head.
	cs = append(cs, tp.dial(t))
	time.Sleep(50 * time.Millisecond)

	start := time.Now()
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Close took %v", el)
	}
	for _, c := range cs {
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			continue // reset is fine
		} else if err != nil {
			t.Fatalf("connection left open: %v", err)
		}
	}
	if _, err := net.DialTimeout("tcp", tp.addr, time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
}

func TestConcurrentTunnels(t *testing.T) {
	echo := startEcho(t)
	tp := startProxy(t, []string{"*.echo.test"}, loopbackTarget(echo, nil)...)
	r := tp.resolver.(*stubResolver)
	const n = 50
	for i := range n {
		r.answers[fmt.Sprintf("h%d.echo.test", i)] = addrs("127.0.0.1")
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", tp.addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := fmt.Sprintf("payload-%d", i)
			fmt.Fprintf(c, "CONNECT h%d.echo.test:443 HTTP/1.1\r\n\r\n%s", i, msg)
			_ = c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err != nil || string(got) != established+msg {
				t.Errorf("tunnel %d: %q %v", i, got, err)
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(tp.log.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d log lines, want %d", len(lines), n)
	}
	for _, l := range lines {
		var i int
		if _, err := fmt.Sscanf(l, "ALLOW h%d.echo.test:443", &i); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
	}
}

func TestServeAfterClose(t *testing.T) {
	p, err := New(nil, WithDecisionLog(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(ln); !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Fatal("listener left open")
	}
}

func TestNewRefusesNilOptions(t *testing.T) {
	for _, opt := range []Option{WithDecisionLog(nil), WithResolver(nil)} {
		if _, err := New(nil, opt); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("err %v", err)
		}
	}
	if _, err := New(nil, nil); err != nil {
		t.Fatalf("nil option: %v", err)
	}
}
