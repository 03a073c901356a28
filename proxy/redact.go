package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// A response to a host whose rule holds credentials may echo what the proxy added to the
// request (an endpoint that reflects its headers, a debug page, an error quoting the
// request). So every secret of the rule is masked, byte for byte with maskByte, in the
// forms such an echo takes, from all that flows back to the workload: the status text, the
// header fields of informational and final responses (names and values), the body and the
// trailer. Masking keeps every length, so the response's framing (Content-Length, chunks)
// stays true. What it cannot catch, an origin that transforms the secret otherwise before
// echoing it (hashes, encrypts, compresses it, or returns a part of it), is in
// docs/operations.md.

// maskByte replaces each byte of a secret's form in a response.
const maskByte = '*'

// minForm is the shortest form, other than the secret itself, that is masked: a shorter one
// would mask ordinary text.
const minForm = 8

// redactChunk is what a redacting body reads from the origin at once.
const redactChunk = 16 << 10

// redactor masks the forms of a rule's secrets. A nil redactor (a rule without credentials)
// masks nothing.
type redactor struct {
	forms  [][]byte
	maxLen int // the longest form
}

// newRedactor returns the redactor of secrets, or nil when there are none.
func newRedactor(secrets []string) *redactor {
	if len(secrets) == 0 {
		return nil
	}
	r := &redactor{}
	seen := make(map[string]bool)
	for _, s := range secrets {
		for _, f := range secretForms(s) {
			if f == "" || seen[f] || (f != s && len(f) < minForm) {
				continue
			}
			seen[f] = true
			r.forms = append(r.forms, []byte(f))
			r.maxLen = max(r.maxLen, len(f))
		}
	}
	return r
}

// secretForms returns the forms of s an origin may echo: s itself; percent-encoded as a
// query (space as '+') and as a path, with upper- and lower-case hex; JSON-escaped, with and
// without HTML escaping and with '/' as "\/"; and base64 in the standard and URL alphabets,
// padded, unpadded, and, for each of the three offsets s can have inside a longer encoded
// text (as in the Basic "user:secret"), the part of its encoding that depends on s alone.
func secretForms(s string) []string {
	forms := []string{s}
	for _, esc := range []string{url.QueryEscape(s), url.PathEscape(s)} {
		forms = append(forms, esc, lowerHexEscapes(esc))
	}
	forms = append(forms, jsonForms(s)...)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(s)))
		for offset := range 3 {
			forms = append(forms, base64Interior(enc, s, offset))
		}
	}
	return forms
}

// lowerHexEscapes spells the hex digits of esc's escapes in lower case.
func lowerHexEscapes(esc string) string {
	b := []byte(esc)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// jsonForms returns s as the inside of a JSON string, as encoders write it.
func jsonForms(s string) []string {
	html, _ := json.Marshal(s) // a string always encodes
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	p := strings.TrimSuffix(plain.String(), "\n")
	unquote := func(q string) string { return q[1 : len(q)-1] }
	h := unquote(string(html))
	return []string{h, unquote(p), strings.ReplaceAll(h, "/", `\/`), strings.ReplaceAll(unquote(p), "/", `\/`)}
}

// base64Interior returns the characters of the unpadded encoding of s, preceded by offset
// bytes, that depend on the bytes of s alone: those s encodes to wherever it stands, at
// that offset from a 3-byte group, inside a longer encoded text.
func base64Interior(enc *base64.Encoding, s string, offset int) string {
	e := enc.WithPadding(base64.NoPadding).EncodeToString(append(make([]byte, offset), s...))
	from, to := (8*offset+5)/6, 8*(offset+len(s))/6
	if to <= from {
		return ""
	}
	return e[from:to]
}

// mask writes maskByte into out, a copy of in, over every form in in that starts before
// end, as far as end; it returns how far past end the last of them reaches (0 when none
// does). Forms are found in in, never in out, so overlapping forms are all masked whole.
func (r *redactor) mask(in, out []byte, end int) (over int) {
	for _, f := range r.forms {
		for i := 0; ; {
			j := bytes.Index(in[i:], f)
			if j < 0 || i+j >= end {
				break
			}
			s := i + j
			e := s + len(f)
			for k := s; k < min(e, end); k++ {
				out[k] = maskByte
			}
			over = max(over, e-end)
			i = s + 1
		}
	}
	return over
}

// string returns s with every form masked.
func (r *redactor) string(s string) string {
	if r == nil {
		return s
	}
	in := []byte(s)
	out := bytes.Clone(in)
	r.mask(in, out, len(in))
	return string(out)
}

// header masks every form in h's field names and values, in place.
func (r *redactor) header(h http.Header) {
	if r == nil {
		return
	}
	renamed := map[string]string{}
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = r.string(v)
		}
		if m := r.string(k); m != k {
			renamed[k] = m
		}
	}
	for k, m := range renamed {
		h[m] = append(h[m], h[k]...)
		delete(h, k)
	}
}

// readable reports whether the proxy can redact resp's body: it has none, or one without a
// content coding. Under a rule with credentials the proxy asks for none
// (Accept-Encoding: identity); an origin that compresses anyway is answered 502, since a
// compressed echo of the secret would pass unseen.
func (r *redactor) readable(resp *http.Response) bool {
	if r == nil || resp.Body == http.NoBody {
		return true
	}
	for _, v := range resp.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// response masks resp's status text and header in place and its body and trailer as they
// are relayed.
func (r *redactor) response(resp *http.Response) *http.Response {
	if r == nil {
		return resp
	}
	resp.Status = r.string(resp.Status)
	r.header(resp.Header)
	resp.Body = &redactReader{src: resp.Body, r: r, atEOF: func() { r.header(resp.Trailer) }}
	return resp
}

// redactReader masks r's forms in a body read from src, whatever the read boundaries: it
// holds back the last maxLen-1 bytes it has read until it knows whether a form starts in
// them, so it hands out a byte only once no form can cover it unseen.
type redactReader struct {
	src   io.ReadCloser
	r     *redactor
	atEOF func() // runs once src has ended: the trailer has been read by then

	buf    []byte // read and not yet handed out, as the origin sent it
	masked int    // how many leading bytes of buf a form found earlier covers
	out    []byte // masked bytes ready to be read
	ready  []byte // what of out is not read yet
	err    error  // src's error, returned once ready is empty
}

func (rr *redactReader) Read(p []byte) (int, error) {
	for len(rr.ready) == 0 {
		if rr.err != nil {
			return 0, rr.err
		}
		rr.fill()
	}
	n := copy(p, rr.ready)
	rr.ready = rr.ready[n:]
	return n, nil
}

func (rr *redactReader) Close() error { return rr.src.Close() }

// fill reads once from src and makes ready what can be handed out. At the end of the body
// everything can; before it, all but the last maxLen-1 bytes. After any other error, what
// is held back never is: it may be the start of a secret.
func (rr *redactReader) fill() {
	held := len(rr.buf)
	rr.buf = slices.Grow(rr.buf, redactChunk)
	n, err := rr.src.Read(rr.buf[held : held+redactChunk])
	rr.buf = rr.buf[:held+n]
	end := len(rr.buf) - (rr.r.maxLen - 1)
	if err != nil {
		rr.err = err
		if errors.Is(err, io.EOF) {
			end = len(rr.buf)
			if rr.atEOF != nil {
				rr.atEOF()
			}
		}
	}
	if end <= 0 {
		return
	}
	rr.out = append(rr.out[:0], rr.buf[:end]...)
	for k := range min(rr.masked, end) {
		rr.out[k] = maskByte
	}
	over := rr.r.mask(rr.buf, rr.out, end)
	rr.masked = max(rr.masked-end, over)
	rr.ready = rr.out
	rr.buf = rr.buf[:copy(rr.buf, rr.buf[end:])]
}
