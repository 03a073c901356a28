package placement_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// relay forwards TCP connections from a loopback port to target until it is cut: then it
// drops every connection and refuses new ones until healed. It stands for a network partition
// between one engine and the cluster node it talks to.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() {
		ln.Close()
		r.Cut()
		r.wg.Wait()
	})
	return r
}

// URL is the relay's NATS URL.
func (r *relay) URL() string { return "nats://" + r.ln.Addr().String() }

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			r.mu.Unlock()
			c.Close()
			continue
		}
		r.conns[c], r.conns[up] = struct{}{}, struct{}{}
		r.wg.Add(2)
		r.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer r.wg.Done()
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// Cut drops every relayed connection and refuses new ones.
func (r *relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// Heal lets connections through again.
func (r *relay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}
