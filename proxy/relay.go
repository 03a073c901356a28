package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// relay sends a permitted request upstream in one framing, whatever the client sent, and its
// responses back: every informational (1xx) one as it comes, then the final one, whose status
// d records; the bytes each way count into d. Under a rule with credentials the request asks
// for an unencoded response and what comes back is redacted (redact.go). It reports whether
// the connection can carry another request.
//
// The request is written while its response is read: a client that sent `Expect:
// 100-continue` sends its body only once the origin's 100 Continue has reached it, and an
// origin may answer before it has read the body. A final response that comes before the
// whole body ends the connection, since what the client sends next could not be framed.
func (ex *exchange) relay(hr *http.Request, rule *inspectRule, d *sandbox.EgressDecision) bool {
	hr.Header.Del("Proxy-Connection")
	hr.Header.Del("Proxy-Authorization")
	if rule.redact != nil {
		hr.Header.Set("Accept-Encoding", "identity") // a compressed echo could not be redacted
	}
	_ = ex.upTLS.SetDeadline(time.Now().Add(ex.p.opts.idleTimeout))
	u := ex.send(hr)
	keep := u.failed() == nil && ex.respond(hr, rule, d)
	keep = u.finish(ex, keep) && keep
	d.BytesOut = u.up.n
	return keep && !hr.Close
}

// upload is a request on its way upstream.
type upload struct {
	up   *countWriter
	done chan error
	body *bodyEnd // nil for a request without a body, written before send returns
}

// send writes hr upstream: at once when it has no body, otherwise in a goroutine that
// upload.finish waits for.
func (ex *exchange) send(hr *http.Request) *upload {
	u := &upload{up: &countWriter{w: ex.upTLS}, done: make(chan error, 1)}
	if hr.ContentLength == 0 {
		u.done <- hr.Write(u.up)
		return u
	}
	u.body = &bodyEnd{ReadCloser: hr.Body}
	hr.Body = u.body
	go func() { u.done <- hr.Write(u.up) }()
	return u
}

// failed returns the error of a request written in place; one still being written has none
// yet.
func (u *upload) failed() error {
	if u.body != nil {
		return nil
	}
	err := <-u.done
	u.done <- err
	return err
}

// finish waits for the request to be written and reports whether it was, whole. When keep is
// false, or the client has not sent its whole body (it waits for a 100 Continue that never
// came, or the origin answered early), it first cuts the body's reads and writes, so the wait
// is short.
func (u *upload) finish(ex *exchange, keep bool) bool {
	if !keep || u.body != nil && !u.body.ended.Load() {
		_ = ex.client.SetReadDeadline(time.Now())
		_ = ex.upTLS.SetWriteDeadline(time.Now())
		<-u.done
		return false
	}
	return <-u.done == nil
}

// bodyEnd notes when a request body has been read to its end.
type bodyEnd struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.ended.Store(true)
	}
	return n, err
}

// respond relays the origin's informational responses and then its final one, and reports
// whether the connection can carry another request. An HTTP/1.0 client is sent no
// informational response (RFC 9110 §15.2). A 101 is never expected (an upgrade is refused
// before anything is sent) and, like a response the proxy cannot read or redact, is
// answered 502.
func (ex *exchange) respond(hr *http.Request, rule *inspectRule, d *sandbox.EgressDecision) bool {
	_ = ex.client.SetWriteDeadline(time.Now().Add(ex.p.opts.idleTimeout))
	down := &countWriter{w: ex.client}
	defer func() { d.BytesIn = down.n }()
	for {
		resp, err := http.ReadResponse(ex.upBr, hr)
		if err != nil {
			// The proxy's stop marks it closed before it closes any connection, so an upstream
			// it cut is seen here as cut (status 0), whichever connection Close reached first.
			if !ex.p.isClosed() {
				ex.badGateway(d)
			}
			return false
		}
		informational := resp.StatusCode >= 100 && resp.StatusCode < 200
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols || !rule.redact.readable(resp):
			resp.Body.Close()
			ex.badGateway(d)
			return false
		case informational && !hr.ProtoAtLeast(1, 1):
			continue
		case informational:
			if writeInformational(down, resp, rule.redact) != nil {
				return false
			}
			continue
		}
		d.Status = resp.StatusCode
		err = rule.redact.response(resp).Write(down)
		resp.Body.Close()
		return err == nil && !resp.Close
	}
}

// badGateway answers 502, which ends the connection, and records it in d if the workload got
// it (a cut client got nothing: status 0).
func (ex *exchange) badGateway(d *sandbox.EgressDecision) {
	if ex.answer(statusBadGateway) {
		d.Status = http.StatusBadGateway
	}
}

// writeInformational writes a 1xx response's head, redacted: its status line and header
// fields, and no Content-Length, which a 1xx never has.
func writeInformational(w io.Writer, resp *http.Response, red *redactor) error {
	text := strings.TrimPrefix(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)), " ")
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	h := resp.Header.Clone()
	h.Del("Content-Length")
	h.Del("Transfer-Encoding")
	red.header(h)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, red.string(text))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
