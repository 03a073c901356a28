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
)

// readHead reads from r until the blank line that ends the request head. It returns the head,
// its terminator included, and whatever the client sent after it (pipelined bytes, a TLS
// ClientHello), which belongs to the tunnel. The terminator must start within limit bytes.
// It fails with the reader's error (EOF, a deadline) or errHeadTooLong.
func readHead(r io.Reader, limit int) (head, rest []byte, err error) {
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 16<<10)
	for searched := 0; ; {
		if i := bytes.Index(buf[searched:], headEnd); i >= 0 {
			i += searched
			if i > limit {
				return nil, nil, errHeadTooLong
			}
			return buf[:i+len(headEnd)], buf[i+len(headEnd):], nil
		}
		if len(buf) >= limit+len(headEnd) {
			return nil, nil, errHeadTooLong
		}
		searched = max(0, len(buf)-len(headEnd)+1)
		n, err := r.Read(chunk[:min(len(chunk), limit+len(headEnd)-len(buf))])
		buf = append(buf, chunk[:n]...)
		if err != nil && n == 0 {
			return nil, nil, err
		}
	}
}

// request is a parsed CONNECT request.
type request struct {
	host string // exactly as received: original case, brackets kept
	port int
}

// parseRequest reads the request line of head (egress-and-reap.md §2.1). It returns the
// target, or the refusal status for a request that is not a well-formed CONNECT: 400 for a
// malformed line or target, 405 for any other method. Header lines are ignored.
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
	if len(host) == 0 || len(host) > 253 || len(portText) == 0 {
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
	if len(trimmed) > 5 {
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
