package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBufPoolBound(t *testing.T) {
	bp := newBufPool(2)
	a, b, c := bp.get(), bp.get(), bp.get()
	if len(*a) != copyBufSize || len(*b) != copyBufSize || len(*c) != smallBufSize {
		t.Fatalf("lent %d, %d, %d bytes; want two large, then small", len(*a), len(*b), len(*c))
	}
	bp.put(a)
	if d := bp.get(); len(*d) != copyBufSize {
		t.Fatalf("after a large one came back: %d bytes", len(*d))
	} else {
		bp.put(d)
	}
	bp.put(b)
	bp.put(c)
	if n := bp.lent.Load(); n != 0 || len(bp.large) != 0 {
		t.Fatalf("%d lent, %d large, after all came back", n, len(bp.large))
	}
	none := newBufPool(0)
	if e := none.get(); len(*e) != smallBufSize {
		t.Fatalf("with no large ones: %d bytes", len(*e))
	}
}

// tcpPair returns two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func TestReadReady(t *testing.T) {
	t.Run("socket", func(t *testing.T) {
		bp := newBufPool(1)
		a, b := tcpPair(t)
		// Waiting holds no buffer.
		got := make(chan string, 1)
		go func() {
			buf, n, err := bp.readReady(b)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string((*buf)[:n])
			bp.put(buf)
		}()
		time.Sleep(50 * time.Millisecond)
		if n := bp.lent.Load(); n != 0 {
			t.Fatalf("%d buffers lent while waiting", n)
		}
		if _, err := io.WriteString(a, "hello"); err != nil {
			t.Fatal(err)
		}
		if s := <-got; s != "hello" {
			t.Fatalf("read %q", s)
		}
		// A deadline ends the wait.
		_ = b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if buf, _, err := bp.readReady(b); buf != nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("past the deadline: %v %v", buf, err)
		}
		_ = b.SetReadDeadline(time.Time{})
		// The end, and a reset.
		_ = a.CloseWrite()
		if buf, _, err := bp.readReady(b); buf != nil || err != io.EOF {
			t.Fatalf("at the end: %v %v", buf, err)
		}
		c, d := tcpPair(t)
		_ = c.SetLinger(0)
		_, _ = io.WriteString(d, "x") // unread by c: its close resets
		time.Sleep(20 * time.Millisecond)
		c.Close()
		time.Sleep(20 * time.Millisecond)
		if buf, _, err := bp.readReady(d); buf != nil || !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("after a reset: %v %v", buf, err)
		}
		// A closed socket.
		b.Close()
		if buf, _, err := bp.readReady(b); buf != nil || !errors.Is(err, net.ErrClosed) {
			t.Fatalf("closed: %v %v", buf, err)
		}
		if n := bp.lent.Load(); n != 0 {
			t.Fatalf("%d buffers still lent", n)
		}
	})
	t.Run("pipe", func(t *testing.T) {
		bp := newBufPool(1)
		a, b := net.Pipe()
		defer b.Close()
		go func() {
			_, _ = io.WriteString(a, "hello")
			a.Close()
		}()
		buf, n, err := bp.readReady(b)
		if err != nil || string((*buf)[:n]) != "hello" {
			t.Fatalf("read %v %v", buf, err)
		}
		bp.put(buf)
		if buf, _, err := bp.readReady(b); buf != nil || err != io.EOF {
			t.Fatalf("at the end: %v %v", buf, err)
		}
		if n := bp.lent.Load(); n != 0 {
			t.Fatalf("%d buffers still lent", n)
		}
	})
}

// TestIdleTunnelsHoldNoBuffers: tunnels that carried data and went quiet hold no copy buffer.
func TestIdleTunnelsHoldNoBuffers(t *testing.T) {
	echo := startEcho(t)
	tp := startProxy(t, []string{"echo.test"}, loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}})...)
	for range 10 {
		c := tp.dial(t)
		if _, err := io.WriteString(c, "CONNECT echo.test:443 HTTP/1.1\r\n\r\nhello"); err != nil {
			t.Fatal(err)
		}
		if got := readN(t, c, len(established)+5); got != established+"hello" {
			t.Fatalf("answer %q", got)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := tp.bufs.lent.Load(); n != 0 {
		t.Fatalf("10 idle tunnels hold %d buffers", n)
	}
}

// TestTunnelOnSmallBuffers: with every large buffer lent, tunnels carry data on small ones.
func TestTunnelOnSmallBuffers(t *testing.T) {
	echo := startEcho(t)
	opts := append(loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}}), withLargeBufs(0))
	tp := startProxy(t, []string{"echo.test"}, opts...)
	c := tp.dial(t)
	if _, err := io.WriteString(c, "CONNECT echo.test:443 HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	readN(t, c, len(established))
	big := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB: many small buffers
	go func() {
		_, _ = io.WriteString(c, big)
		_ = c.CloseWrite()
	}()
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != big {
		t.Fatalf("echoed %d bytes (%v), want %d", len(rest), err, len(big))
	}
}
