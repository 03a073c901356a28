package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

var errSNIMismatch = errors.New("the TLS ClientHello names another host than the CONNECT request")

// inspectRule is one inspecting allowlist entry, compiled.
type inspectRule struct {
	pattern string // the host pattern as the spec wrote it: the rule's name in decisions
	host    pattern
	methods []string
	paths   []string
	shadow  bool
	creds   []egresslog.Credential
	redact  *redactor // the creds' secrets, masked in responses; nil without creds
}

// permits reports whether the rule lets method reach path (a normalised, decoded path).
func (r *inspectRule) permits(method, path string) bool {
	if len(r.methods) > 0 && !slices.Contains(r.methods, method) {
		return false
	}
	if len(r.paths) == 0 {
		return true
	}
	return slices.ContainsFunc(r.paths, func(p string) bool { return sandbox.MatchEgressPath(p, path) })
}

// swap replaces, in the header of each credential of the rule whose methods and paths match
// the request, the credential's placeholder by its secret. Only a permitted request reaches
// it, so a refused one is never sent anywhere with a secret in it; nor is a TRACE or TRACK,
// which would echo it back, whatever the credential lists.
func (r *inspectRule) swap(hr *http.Request, path string) {
	if sandbox.EchoMethod(hr.Method) {
		return
	}
	for _, c := range r.creds {
		if !slices.Contains(c.Methods, hr.Method) {
			continue
		}
		if len(c.Paths) > 0 && !slices.ContainsFunc(c.Paths, func(p string) bool { return sandbox.MatchEgressPath(p, path) }) {
			continue
		}
		values := hr.Header.Values(c.Header)
		for i, v := range values {
			values[i] = strings.ReplaceAll(v, c.Placeholder, c.Secret)
		}
	}
}

// inspectRuleFor returns the inspecting rule host falls under, or nil for a tunnel.
func (p *Proxy) inspectRuleFor(host string) *inspectRule {
	h := strings.ToLower(host)
	for i := range p.inspected {
		if p.inspected[i].host.match(h) {
			return &p.inspected[i]
		}
	}
	return nil
}

// CACertificatePEM returns the PEM certificate of the CA the proxy made at start to
// terminate TLS for inspected hosts, or nil when no rule inspects. The CA's private key never
// leaves the process.
func (p *Proxy) CACertificatePEM() []byte {
	if p.ca == nil {
		return nil
	}
	return slices.Clone(p.ca.certPEM)
}

// prefixConn reads the bytes a client pipelined behind its CONNECT head before the socket.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// inspect serves an inspected CONNECT: it terminates the client's TLS with a leaf of the
// proxy's CA for exactly the CONNECT host (a ClientHello naming another host is refused:
// domain fronting), then reads HTTP/1.1 requests one at a time. Each is decided on its own
// and logged with its method and path: a request whose target is not a normal origin-form
// path, whose Host header names another host, that asks for an upgrade, or that the rule
// does not permit is answered 403 and ends the connection, and nothing of it is sent
// upstream. A permitted request is written to the upstream over TLS verified against the
// configured roots (system roots by default; never skipped), and its response is relayed.
func (p *Proxy) inspect(c, up net.Conn, req request, rule *inspectRule, rest []byte) {
	client := c
	if len(rest) > 0 {
		client = &prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(rest), c)}
	}
	tc := tls.Server(client, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"}, // no h2: a client that offers it falls back
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if !strings.EqualFold(hello.ServerName, req.host) {
				return nil, errSNIMismatch
			}
			return p.ca.leaf(req.host)
		},
	})
	// The head timeout bounds the handshake as a deadline on the connection, not as a
	// context: crypto/tls closes the connection when a handshake's context ends, so the
	// workload would see the hang-up before the refusal is logged. A deadline fails the
	// handshake and leaves the close to the caller, after the line is written.
	_ = c.SetDeadline(time.Now().Add(p.opts.headTimeout))
	err := tc.HandshakeContext(p.ctx)
	_ = c.SetDeadline(time.Time{})
	if err != nil {
		// A ClientHello for another host, or a client that refused the proxy's CA (a pinned
		// client): the connection is refused, and its line says why, so it is not mistaken
		// for a host the allowlist does not name.
		_ = p.log.WriteTLSRefusal(req.host, req.port, handshakeReason(err))
		return
	}
	limit := &headLimit{r: tc}
	ex := &exchange{p: p, req: req, client: tc, up: up, limit: limit, br: bufio.NewReader(limit)}
	for ex.next(rule) {
	}
}

// exchange is one inspected connection's state: the client side, read a request at a time,
// and the upstream, whose TLS is opened on the first permitted request.
type exchange struct {
	p      *Proxy
	req    request
	client *tls.Conn
	up     net.Conn
	limit  *headLimit
	br     *bufio.Reader
	upTLS  *tls.Conn
	upBr   *bufio.Reader
}

// next serves one request and reports whether the connection goes on. Its decision line is
// written once the exchange is over (answered, refused, or cut, the proxy's stop included), so
// it carries the status the workload got and the bytes each way.
func (ex *exchange) next(rule *inspectRule) bool {
	_ = ex.client.SetReadDeadline(time.Now().Add(ex.p.opts.idleTimeout))
	ex.limit.arm(maxHead)
	hr, err := http.ReadRequest(ex.br)
	ex.limit.arm(-1) // the body is bounded by the idle timeout, as a tunnel's bytes are
	if err != nil {
		if !errors.Is(err, io.EOF) {
			ex.answer("400 Bad Request")
		}
		return false
	}
	_ = ex.client.SetReadDeadline(time.Time{})
	path, raw, class := requestPath(hr.RequestURI)
	method := hr.Method
	if !upperToken(method) {
		method = "INVALID" // refused below; the line names no guest text the grammar refuses
	}
	d := sandbox.EgressDecision{Decision: sandbox.DecisionAllow, Host: ex.req.host, Port: ex.req.port,
		Method: method, Path: loggable(raw), Rule: rule.pattern}
	// What the enforcer refuses whatever the rule is refused in shadow too; what the rule
	// would deny (its methods and paths, a path that is not normal) a shadow rule passes.
	switch {
	case class == pathMalformed || !upperToken(hr.Method) || !sameHost(hr.Host, ex.req.host) || hr.Header.Get("Upgrade") != "":
		return ex.refuse(d, sandbox.DecisionDeny, http.StatusForbidden, statusForbidden)
	case class == pathNormal && rule.permits(hr.Method, path):
	case !rule.shadow:
		return ex.refuse(d, sandbox.DecisionDeny, http.StatusForbidden, statusForbidden)
	default:
		d.Decision = sandbox.DecisionWouldDeny
	}
	if ex.upTLS == nil && !ex.openUpstream() {
		if ex.p.isClosed() { // the stop cut the handshake: nothing went out, nothing came back
			_ = ex.p.log.WriteRequest(d)
			return false
		}
		return ex.refuse(d, sandbox.DecisionUnreachable, http.StatusBadGateway, statusBadGateway)
	}
	if d.Decision == sandbox.DecisionAllow { // never on a request a shadow rule would refuse
		rule.swap(hr, path)
	}
	ok := ex.relay(hr, rule, &d)
	_ = ex.p.log.WriteRequest(d)
	return ok
}

// refuse logs d as code with status, then answers the refusal, which ends the connection:
// the line is written before the client can read its answer.
func (ex *exchange) refuse(d sandbox.EgressDecision, code sandbox.EgressDecisionCode, status int, line string) bool {
	d.Decision, d.Status = code, status
	_ = ex.p.log.WriteRequest(d)
	ex.answer(line)
	return false
}

// openUpstream starts TLS to the CONNECT host over the dialled connection, verifying its
// certificate for that name against the configured roots.
func (ex *exchange) openUpstream() bool {
	t := tls.Client(ex.up, &tls.Config{
		ServerName: ex.req.host,
		RootCAs:    ex.p.opts.upstreamRoots, // nil: the system roots
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	ctx, cancel := context.WithTimeout(ex.p.ctx, ex.p.opts.dialTimeout)
	defer cancel()
	if err := t.HandshakeContext(ctx); err != nil {
		return false
	}
	ex.upTLS, ex.upBr = t, bufio.NewReader(t)
	return true
}

// answer writes a refusal that ends the connection, and reports whether it was written.
func (ex *exchange) answer(status string) bool {
	_ = ex.client.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := io.WriteString(ex.client, "HTTP/1.1 "+status+"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
	return err == nil
}

// sameHost reports whether a Host header names the CONNECT host (on port 443 or none).
func sameHost(header, host string) bool {
	h := header
	if hh, port, err := net.SplitHostPort(header); err == nil {
		if port != strconv.Itoa(allowedPort) {
			return false
		}
		h = hh
	}
	return strings.EqualFold(h, host)
}

// upperToken reports a method a decision line can carry: an upper-case RFC 9110 token of 1
// to 32 bytes. Any other method is refused, so every request the proxy passes is logged.
func upperToken(m string) bool {
	return m != "" && len(m) <= 32 && !strings.ContainsFunc(m, func(r rune) bool {
		return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
	})
}

// compileInspect compiles the inspecting rules and, when there are any, makes the CA.
func (p *Proxy) compileInspect() error {
	if len(p.opts.inspect) == 0 {
		if len(p.opts.credentials) > 0 {
			return fmt.Errorf("%w: credentials without an inspecting rule", ErrInvalidConfig)
		}
		return nil
	}
	for _, c := range p.opts.credentials {
		switch {
		case !slices.ContainsFunc(p.opts.inspect, func(r sandbox.EgressRule) bool { return strings.EqualFold(r.Host, c.Host) }):
			return fmt.Errorf("%w: a credential for %q, which no inspecting rule names", ErrInvalidConfig, c.Host)
		case sandbox.HostPattern(c.Host):
			return fmt.Errorf("%w: a credential for %q, a host pattern: the workload would pick where it goes", ErrInvalidConfig, c.Host)
		case len(c.Methods) == 0:
			return fmt.Errorf("%w: a credential for %q without a method list", ErrInvalidConfig, c.Host)
		}
	}
	for _, r := range p.opts.inspect {
		rule := inspectRule{pattern: r.Host, host: compilePattern(strings.ToLower(r.Host)), methods: r.Methods, paths: r.Paths, shadow: r.Shadow}
		var secrets []string
		for _, c := range p.opts.credentials {
			if strings.EqualFold(c.Host, r.Host) {
				rule.creds = append(rule.creds, c)
				secrets = append(secrets, c.Secret)
			}
		}
		rule.redact = newRedactor(secrets)
		p.inspected = append(p.inspected, rule)
	}
	ca, err := newAuthority(time.Now())
	if err != nil {
		return err
	}
	p.ca = ca
	return nil
}

// errHeadTooLarge ends a request head over maxHead.
var errHeadTooLarge = errors.New("request head too large")

// headLimit bounds what one request head may read from the client (n >= 0), and nothing
// while a body is read (n < 0). bufio may read a little past a head; that counts against it.
type headLimit struct {
	r io.Reader
	n int64
}

func (l *headLimit) arm(n int64) { l.n = n }

func (l *headLimit) Read(b []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(b)
	}
	if l.n == 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}
