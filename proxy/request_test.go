package proxy

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParseRequest(t *testing.T) {
	long := strings.Repeat("a", 249) + ".com" // 253 bytes
	cases := []struct {
		name     string
		head     string
		want     request
		wantCode string
	}{
		{name: "plain", head: "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", want: request{"api.example.com", 443}},
		{name: "case kept", head: "CONNECT API.Example.com:443 HTTP/1.1\r\n\r\n", want: request{"API.Example.com", 443}},
		{name: "HTTP/1.0", head: "CONNECT a:443 HTTP/1.0\r\n\r\n", want: request{"a", 443}},
		{name: "any HTTP/ suffix", head: "CONNECT a:443 HTTP/9\r\n\r\n", want: request{"a", 443}},
		{name: "bracketed ipv6", head: "CONNECT [::1]:443 HTTP/1.1\r\n\r\n", want: request{"[::1]", 443}},
		{name: "bare ipv6 split at last colon", head: "CONNECT ::1:443 HTTP/1.1\r\n\r\n", want: request{"::1", 443}},
		{name: "other port parses", head: "CONNECT a:80 HTTP/1.1\r\n\r\n", want: request{"a", 80}},
		{name: "leading zeros", head: "CONNECT a:0443 HTTP/1.1\r\n\r\n", want: request{"a", 443}},
		{name: "tabs and extra spaces", head: "CONNECT \t a:443  HTTP/1.1 \r\n\r\n", want: request{"a", 443}},
		{name: "Latin-1 space NBSP separates", head: "CONNECT\xa0a:443\x85HTTP/1.1\r\n\r\n", want: request{"a", 443}},
		{name: "0x1f separates", head: "CONNECT\x1fa:443 HTTP/1.1\r\n\r\n", want: request{"a", 443}},
		{name: "host 253 bytes", head: "CONNECT " + long + ":443 HTTP/1.1\r\n\r\n", want: request{long, 443}},
		{name: "Proxy-Authorization ignored", head: "CONNECT a:443 HTTP/1.1\r\nProxy-Authorization: Basic eA==\r\n\r\n", want: request{"a", 443}},
		{name: "lone LF in header lines", head: "CONNECT a:443 HTTP/1.1\r\nX: y\nZ: w\r\n\r\n", want: request{"a", 443}},

		{name: "GET absolute URI", head: "GET http://a/ HTTP/1.1\r\n\r\n", wantCode: statusNotAllowed},
		{name: "lower-case connect", head: "connect a:443 HTTP/1.1\r\n\r\n", wantCode: statusNotAllowed},
		{name: "POST", head: "POST a:443 HTTP/1.1\r\n\r\n", wantCode: statusNotAllowed},
		{name: "GET with bad target", head: "GET nothing HTTP/1.1\r\n\r\n", wantCode: statusNotAllowed},
		{name: "empty line", head: "\r\n\r\n", wantCode: statusBadRequest},
		{name: "two tokens", head: "CONNECT a:443\r\n\r\n", wantCode: statusBadRequest},
		{name: "four tokens", head: "CONNECT a:443 HTTP/1.1 x\r\n\r\n", wantCode: statusBadRequest},
		{name: "not HTTP", head: "CONNECT a:443 FTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "lower-case http", head: "CONNECT a:443 http/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "no port", head: "CONNECT a HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "empty port", head: "CONNECT a: HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "empty host", head: "CONNECT :443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "signed port", head: "CONNECT a:+443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "non-ASCII digit port", head: "CONNECT a:٤٤٣ HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "port zero", head: "CONNECT a:0 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "port too large", head: "CONNECT a:65536 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "port huge", head: "CONNECT a:99999999999999999999999 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "host 254 bytes", head: "CONNECT a" + long + ":443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "host with NUL", head: "CONNECT a\x00b:443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "host with DEL", head: "CONNECT a\x7fb:443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "host with Latin-1 letter", head: "CONNECT caf\xe9:443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
		{name: "host with UTF-8", head: "CONNECT café:443 HTTP/1.1\r\n\r\n", wantCode: statusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, code := parseRequest([]byte(tc.head))
			if got != tc.want || code != tc.wantCode {
				t.Fatalf("got %+v %q, want %+v %q", got, code, tc.want, tc.wantCode)
			}
		})
	}
}

func TestReadHead(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		limit    int
		oneByte  bool
		wantHead string
		wantRest string
		wantErr  error
	}{
		{name: "pipelined bytes kept", in: "CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03\x01hello", limit: 100,
			wantHead: "CONNECT a:443 HTTP/1.1\r\n\r\n", wantRest: "\x16\x03\x01hello"},
		{name: "byte by byte", in: "CONNECT a:443 HTTP/1.1\r\nX: y\r\n\r\nrest", limit: 100, oneByte: true,
			wantHead: "CONNECT a:443 HTTP/1.1\r\nX: y\r\n\r\n", wantRest: ""},
		{name: "terminator starts at the limit", in: strings.Repeat("a", 10) + "\r\n\r\n", limit: 10,
			wantHead: strings.Repeat("a", 10) + "\r\n\r\n"},
		{name: "terminator past the limit", in: strings.Repeat("a", 11) + "\r\n\r\n", limit: 10, wantErr: errHeadTooLong},
		{name: "no terminator", in: strings.Repeat("a", 100), limit: 10, wantErr: errHeadTooLong},
		{name: "EOF first", in: "CONNECT a:443 HTTP/1.1\r\n", limit: 100, wantErr: io.EOF},
		{name: "bare LF is not a terminator", in: "CONNECT a:443 HTTP/1.1\n\n", limit: 100, wantErr: io.EOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.in)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			head, rest, err := readHead(r, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if string(head) != tc.wantHead || string(rest) != tc.wantRest {
				t.Fatalf("head %q rest %q, want %q %q", head, rest, tc.wantHead, tc.wantRest)
			}
		})
	}
}
