package natscluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Relay forwards TCP connections from a loopback port to target (a node's client address,
// host:port) until it is cut: then it drops every connection and refuses new ones until
// healed. It stands for a network partition between one process and the cluster: connect
// through [Relay.URL] only, with nats.IgnoreDiscoveredServers, so the client cannot go around it.
type Relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewRelay starts a relay to target on a free loopback port; it stops when the test ends.
func NewRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
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
func (r *Relay) URL() string { return "nats://" + r.ln.Addr().String() }

func (r *Relay) accept() {
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
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	for c := range r.conns {
		c.Close()
	}
	clear(r.conns)
}

// Heal lets connections through again: a client reconnects.
func (r *Relay) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = false
}
