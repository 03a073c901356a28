package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// Proxy is the filtering CONNECT proxy. Create it with [New], run it with [Proxy.Serve] and
// stop it with [Proxy.Close]. It is safe for concurrent use.
type Proxy struct {
	allow     []string
	patterns  []pattern
	opts      options
	policy    destPolicy
	resolver  Resolver
	log       *egresslog.Writer
	inspected []inspectRule // hosts whose requests are decided one by one
	ca        *authority    // made at start when a rule inspects; its key stays in memory

	ctx      context.Context // cancelled by Close: aborts resolutions and dials
	cancel   context.CancelFunc
	slots    chan struct{} // one per connection being handled, up to maxConns
	overflow chan struct{} // one per over-cap connection being refused
	bufs     *bufPool      // the tunnels' copy buffers
	wg       sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
}

// New returns a proxy that opens tunnels to the hosts that allow names (each entry a
// [Match] pattern) on port 443, configured by opts over the defaults: decision log on
// standard output, no private allowance, net.DefaultResolver. Entries are used as given;
// [ParseAllowlist] reads the environment's form. It fails with [ErrInvalidConfig] when an
// option does.
func New(allow []string, opts ...Option) (*Proxy, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	p := &Proxy{
		allow:     append([]string(nil), allow...),
		opts:      o,
		policy:    destPolicy{private: o.private, admitLoopback: o.admitLoopback},
		resolver:  o.resolver,
		log:       egresslog.NewWriter(o.log),
		slots:     make(chan struct{}, o.maxConns),
		overflow:  make(chan struct{}, overflowSlots),
		bufs:      newBufPool(o.largeBufs),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	for _, a := range allow {
		p.patterns = append(p.patterns, compilePattern(a))
	}
	if err := p.compileInspect(); err != nil {
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// WriteReady writes the readiness line for port to the decision log (egress-and-reap.md
// §2.5). Call it once the listener is bound, before [Proxy.Serve]; [Run] does.
//
// A proxy that inspects first writes its CA certificate ([egresslog.FormatCA]), so whoever
// reads the log up to the readiness line has the certificate a workload must trust.
func (p *Proxy) WriteReady(port int) error {
	if p.ca != nil {
		if err := p.log.WriteCA(p.ca.cert.Raw); err != nil {
			return err
		}
	}
	return p.log.WriteReady(port, p.allow)
}

// allowed reports whether host may be tunnelled to on port.
func (p *Proxy) allowed(host string, port int) bool {
	if port != allowedPort {
		return false
	}
	h := strings.ToLower(host)
	for _, pat := range p.patterns {
		if pat.match(h) {
			return true
		}
	}
	return false
}

// Serve accepts connections on ln and handles each on its own goroutine until [Proxy.Close]
// is called, then returns nil. It returns [ErrClosed] when the proxy was already closed, and
// the listener's error when accepting fails for a reason other than a transient shortage
// (out of file descriptors or buffers, an aborted handshake), which it waits out. Serve
// closes ln when it returns.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
		ln.Close()
	}()

	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.isClosed() {
				return nil
			}
			if transientAccept(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
				case <-p.ctx.Done():
				}
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 0
		select {
		case p.slots <- struct{}{}:
		default:
			p.refuseOverCap(c)
			continue
		}
		p.wg.Add(1)
		go func() {
			defer func() { <-p.slots }()
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

// refuseOverCap answers a connection over the cap 503, unlogged. Up to overflowSlots such
// answers linger as [Proxy.refuse] does, so the client reads the answer rather than a reset;
// past that the answer is written and the connection closed at once.
func (p *Proxy) refuseOverCap(c net.Conn) {
	select {
	case p.overflow <- struct{}{}:
	default:
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, refusal(statusUnavailable))
		c.Close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.overflow }()
		defer p.wg.Done()
		if !p.track(c) {
			return
		}
		defer p.release(c)
		p.refuse(c, statusUnavailable)
	}()
}

func transientAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Close stops the proxy: its listeners stop accepting, resolutions and dials in progress are
// abandoned, every client and upstream connection is closed, and Close returns once every
// handler has finished. Tunnels are cut, not drained. Later calls return nil at once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for ln := range p.listeners {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// track registers c so that Close can cut it. It returns false, having closed c, when the
// proxy is already closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) release(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// handle serves one client connection from its first byte to its close.
func (p *Proxy) handle(c net.Conn) {
	if !p.track(c) {
		return
	}
	defer p.release(c)

	_ = c.SetReadDeadline(time.Now().Add(p.opts.headTimeout))
	line, rest, err := readHead(c, maxHead)
	if err != nil {
		p.refuse(c, statusBadRequest)
		return
	}
	req, status := parseRequest(line)
	if status != "" {
		p.refuse(c, status)
		return
	}
	if !p.allowed(req.host, req.port) {
		p.decide(sandbox.DecisionDeny, req)
		p.refuse(c, statusForbidden)
		return
	}
	up, decision := p.connect(p.ctx, req.host, req.port)
	if up != nil && !p.track(up) {
		return
	}
	rule := p.inspectRuleFor(req.host)
	if rule == nil || decision != sandbox.DecisionAllow { // an inspected host's requests are logged one by one
		p.decide(decision, req)
	}
	switch decision {
	case sandbox.DecisionDenyNonGlobal:
		p.refuse(c, statusForbidden)
		return
	case sandbox.DecisionUnreachable:
		p.refuse(c, statusBadGateway)
		return
	}
	defer p.release(up)
	_ = c.SetDeadline(time.Time{})
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	if rule != nil {
		p.inspect(c, up, req, rule, rest)
		return
	}
	p.tunnel(c, up, rest)
}

// decide writes one decision line. A log that cannot be written does not change the answer.
func (p *Proxy) decide(code sandbox.EgressDecisionCode, req request) {
	_ = p.log.WriteDecision(code, req.host, req.port)
}

func refusal(status string) string {
	return "HTTP/1.1 " + status + "\r\ncontent-length: 0\r\n\r\n"
}

type closeWriter interface{ CloseWrite() error }

// refuse answers c with status and ends the conversation gracefully: it half-closes, then
// reads and discards what the client already sent for a moment, so that closing does not
// reset the connection before the client has read the answer. It discards through a buffer
// borrowed only while bytes are there (bufPool.readReady).
func (p *Proxy) refuse(c net.Conn, status string) {
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := io.WriteString(c, refusal(status)); err != nil {
		return
	}
	if cw, ok := c.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(p.opts.lingerTime))
	for discarded := 0; discarded < maxHead; {
		buf, n, err := p.bufs.readReady(c)
		if buf != nil {
			p.bufs.put(buf)
		}
		if err != nil {
			return
		}
		discarded += n
	}
}
