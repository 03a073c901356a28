package proxy

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// Refusal statuses, each answered as "HTTP/1.1 <status>\r\ncontent-length: 0\r\n\r\n".
const (
	statusBadRequest  = "400 Bad Request"
	statusForbidden   = "403 Forbidden"
	statusNotAllowed  = "405 Method Not Allowed"
	statusBadGateway  = "502 Bad Gateway"
	statusUnavailable = "503 Service Unavailable"
)

var (
	errHeadTooLong = errors.New("request head longer than 64 KiB")
	headEnd        = []byte("\r\n\r\n")
	lineEnd        = []byte("\r\n")
)

// headChunk is what readHead reads at once. A connection still sending its head holds one
// chunk and its reduced request line, however long the head: the header lines are only
// scanned for the blank line, and the request line is kept only as far as parseRequest needs
// it (lineReducer).
const headChunk = 1 << 10

// readHead reads from r until the blank line that ends the request head. It returns the
// request line reduced by a lineReducer (parseRequest answers it exactly as it would the
// whole line), and whatever the client sent after the head in the same read (pipelined bytes,
// the start of a TLS ClientHello), which belongs to the tunnel; the rest is still unread. The
// terminator must start within limit bytes. It fails with the reader's error (EOF, a
// deadline) or errHeadTooLong.
func readHead(r io.Reader, limit int) (line, rest []byte, err error) {
	chunk := make([]byte, headChunk)
	var (
		lr       lineReducer
		lineDone bool
		heldCR   bool    // the line so far ends in a CR that may start its CRLF
		total    int     // head bytes read before chunk's current contents
		tail     [3]byte // the last bytes read before them, for a terminator split across reads
		ntail    int
	)
	for {
		room := limit + len(headEnd) - total
		if room <= 0 {
			return nil, nil, errHeadTooLong
		}
		n, err := r.Read(chunk[:min(len(chunk), room)])
		data := chunk[:n]
		if !lineDone && n > 0 {
			lineDone = feedLine(&lr, data, &heldCR)
		}
		if end := terminatorEnd(tail[:ntail], data); end >= 0 {
			if total+end-len(headEnd) > limit {
				return nil, nil, errHeadTooLong
			}
			return lr.line(), data[end:], nil
		}
		total += n
		ntail = keepTail(&tail, ntail, data)
		if err != nil && n == 0 {
			return nil, nil, err
		}
	}
}

// feedLine feeds the request line's part of data to lr and reports whether the line ended:
// the line ends at the first CRLF. A CR that ends data is held back, in heldCR, until the next
// data tells whether it starts that CRLF.
func feedLine(lr *lineReducer, data []byte, heldCR *bool) bool {
	if *heldCR {
		*heldCR = false
		if data[0] == '\n' {
			return true
		}
		lr.feedByte('\r')
	}
	if i := bytes.Index(data, lineEnd); i >= 0 {
		lr.feed(data[:i])
		return true
	}
	if data[len(data)-1] == '\r' {
		*heldCR = true
		data = data[:len(data)-1]
	}
	lr.feed(data)
	return false
}

// terminatorEnd returns where in data the first "\r\n\r\n" of prev+data ends, or -1. prev
// holds fewer than four bytes and no terminator, so a terminator that starts in prev ends in
// data.
func terminatorEnd(prev, data []byte) int {
	if len(prev) > 0 {
		var probe [6]byte
		m := copy(probe[:], prev)
		m += copy(probe[m:], data[:min(len(data), len(headEnd)-1)])
		if i := bytes.Index(probe[:m], headEnd); i >= 0 {
			return i + len(headEnd) - len(prev)
		}
	}
	if i := bytes.Index(data, headEnd); i >= 0 {
		return i + len(headEnd)
	}
	return -1
}

// keepTail updates tail, holding n bytes, to the last (up to 3) bytes of tail+data and
// returns their count.
func keepTail(tail *[3]byte, n int, data []byte) int {
	if len(data) >= len(tail) {
		copy(tail[:], data[len(data)-len(tail):])
		return len(tail)
	}
	var all [6]byte
	m := copy(all[:], tail[:n])
	m += copy(all[m:], data)
	k := min(m, len(tail))
	copy(tail[:], all[m-k:m])
	return k
}

// lineReducer keeps what parseRequest needs of a request line fed to it in pieces, in under
// 300 bytes however long the line, and line returns it: parseRequest answers the reduced
// line exactly as it answers the whole one (the same request, or the same refusal status).
// The reduction:
//
//   - White space between tokens becomes one space; leading and trailing white space goes.
//   - Token 1, the method: its first 8 bytes (longer than "CONNECT" is not "CONNECT").
//   - Token 3, the version: its first 5 bytes (only the prefix "HTTP/" is read).
//   - Token 4: its first byte (only its existence is read); later tokens: nothing.
//   - Token 2, the target: kept whole up to 259 bytes (a 253-byte host, ":", five digits).
//     A longer target can only be valid as a host of at most 253 bytes, its last ":", and a
//     port of digits whose significant part is at most five. So at the 260th byte, if what
//     is kept has that shape, the port is kept as one leading "0" (when it has any) and its
//     significant digits, and so are the digits that follow; anything else, now or later
//     (a ":" would make the host longer than 253 bytes), is invalid and is kept as a NUL
//     byte, which parseRequest refuses in a host and in a port alike, after which nothing
//     more of the token is kept.
type lineReducer struct {
	out      []byte
	tok      int  // tokens begun
	inTok    bool // the last byte fed was in a token
	n        int  // bytes of the current token fed
	start    int  // where the current token begins in out
	portMode bool // token 2 is past targetKeep bytes and still valid: out ends in its port
	poisoned bool // token 2 is invalid and ends in a NUL
	zero     bool // port mode: the port's leading "0" is kept
	sig      int  // port mode: significant port digits kept
}

const (
	methodKeep  = len("CONNECT") + 1
	versionKeep = len("HTTP/")
	maxHostLen  = 253
	maxPortSig  = 5
	targetKeep  = maxHostLen + 1 + maxPortSig
)

func (r *lineReducer) line() []byte { return r.out }

func (r *lineReducer) feed(b []byte) {
	for _, c := range b {
		r.feedByte(c)
	}
}

func (r *lineReducer) feedByte(c byte) {
	if isSpaceLatin1(c) {
		if r.inTok {
			r.inTok = false
			if r.tok < 4 {
				r.out = append(r.out, ' ')
			}
		}
		return
	}
	if !r.inTok {
		r.inTok = true
		r.tok++
		r.n = 0
		r.start = len(r.out)
	}
	r.n++
	switch r.tok {
	case 1:
		r.keepIf(c, r.n <= methodKeep)
	case 2:
		r.target(c)
	case 3:
		r.keepIf(c, r.n <= versionKeep)
	case 4:
		r.keepIf(c, r.n <= 1)
	}
}

func (r *lineReducer) keepIf(c byte, ok bool) {
	if ok {
		r.out = append(r.out, c)
	}
}

// target feeds one byte of token 2.
func (r *lineReducer) target(c byte) {
	if r.poisoned {
		return
	}
	if !r.portMode {
		if r.n <= targetKeep {
			r.out = append(r.out, c)
			return
		}
		kept := r.out[r.start:]
		j := bytes.LastIndexByte(kept, ':')
		if j < 1 || j > maxHostLen {
			r.poison()
			return
		}
		port := kept[j+1:]
		for _, d := range port {
			if d < '0' || d > '9' {
				r.poison()
				return
			}
		}
		sig := bytes.TrimLeft(port, "0")
		if len(sig) > maxPortSig {
			r.poison()
			return
		}
		var keep [maxPortSig]byte
		r.sig = copy(keep[:], sig)
		r.zero = len(sig) < len(port)
		r.out = r.out[:r.start+j+1]
		if r.zero {
			r.out = append(r.out, '0')
		}
		r.out = append(r.out, keep[:r.sig]...)
		r.portMode = true
	}
	switch {
	case c == '0' && r.sig == 0:
		if !r.zero {
			r.zero = true
			r.out = append(r.out, '0')
		}
	case c >= '0' && c <= '9' && r.sig < maxPortSig:
		r.sig++
		r.out = append(r.out, c)
	default:
		r.poison()
	}
}

func (r *lineReducer) poison() {
	r.poisoned = true
	r.out = append(r.out, 0)
}

// request is a parsed CONNECT request.
type request struct {
	host string // exactly as received: original case, brackets kept
	port int
}

// parseRequest reads the request line of head (egress-and-reap.md §2.1), a whole head or a
// request line alone (readHead's reduced one). It returns the target, or the refusal status
// for a request that is not a well-formed CONNECT: 400 for a malformed line or target, 405
// for any other method. Header lines are ignored.
func parseRequest(head []byte) (request, string) {
	line := head
	if i := bytes.Index(head, []byte("\r\n")); i >= 0 {
		line = head[:i]
	}
	// Bytes are Latin-1 characters, split on Python's whitespace as the reference does.
	tokens := fieldsLatin1(line)
	if len(tokens) != 3 || !bytes.HasPrefix(tokens[2], []byte("HTTP/")) {
		return request{}, statusBadRequest
	}
	if string(tokens[0]) != "CONNECT" {
		return request{}, statusNotAllowed
	}
	target := tokens[1]
	i := bytes.LastIndexByte(target, ':')
	if i < 0 {
		return request{}, statusBadRequest
	}
	host, portText := target[:i], target[i+1:]
	if len(host) == 0 || len(host) > maxHostLen || len(portText) == 0 {
		return request{}, statusBadRequest
	}
	for _, c := range host {
		if c < 0x21 || c > 0x7e {
			return request{}, statusBadRequest
		}
	}
	for _, c := range portText {
		if c < '0' || c > '9' {
			return request{}, statusBadRequest
		}
	}
	trimmed := bytes.TrimLeft(portText, "0")
	if len(trimmed) > maxPortSig {
		return request{}, statusBadRequest
	}
	port, _ := strconv.Atoi(string(trimmed))
	if port < 1 || port > 65535 {
		return request{}, statusBadRequest
	}
	return request{host: string(host), port: port}, ""
}

// isSpaceLatin1 reports whether byte c, read as a Latin-1 character, is white space to
// Python's str.split(): \t \n \v \f \r, the separators 0x1C–0x1F, space, NEL and NBSP.
func isSpaceLatin1(c byte) bool {
	return c >= 0x09 && c <= 0x0d || c >= 0x1c && c <= 0x20 || c == 0x85 || c == 0xa0
}

func fieldsLatin1(b []byte) [][]byte {
	var out [][]byte
	for i := 0; i < len(b); {
		for i < len(b) && isSpaceLatin1(b[i]) {
			i++
		}
		j := i
		for j < len(b) && !isSpaceLatin1(b[j]) {
			j++
		}
		if j > i {
			out = append(out, b[i:j])
		}
		i = j
	}
	return out
}
