package proxy

import (
	"errors"
	"io"
	"math/rand/v2"
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
	// A head ending 100 bytes into its fourth chunk.
	long := "CONNECT a:443 HTTP/1.1\r\nX: "
	long += strings.Repeat("b", 3*headChunk+100-len(long)-len(headEnd)) + "\r\n\r\n"
	cases := []struct {
		name     string
		in       string
		limit    int
		oneByte  bool
		wantLine string // the request line, before reduction
		wantRest string
		wantErr  error
	}{
		{name: "pipelined bytes kept", in: "CONNECT a:443 HTTP/1.1\r\n\r\n\x16\x03\x01hello", limit: 100,
			wantLine: "CONNECT a:443 HTTP/1.1", wantRest: "\x16\x03\x01hello"},
		{name: "byte by byte", in: "CONNECT a:443 HTTP/1.1\r\nX: y\r\n\r\nrest", limit: 100, oneByte: true,
			wantLine: "CONNECT a:443 HTTP/1.1", wantRest: ""},
		{name: "head over several chunks", in: long + "rest", limit: maxHead, wantLine: "CONNECT a:443 HTTP/1.1",
			wantRest: "rest"},
		{name: "request line over several chunks", in: "CONNECT " + strings.Repeat("c", 2*headChunk) + ":443 HTTP/1.1\r\n\r\n",
			limit: maxHead, wantLine: "CONNECT " + strings.Repeat("c", 2*headChunk) + ":443 HTTP/1.1"},
		{name: "terminator right after the line", in: "CONNECT a:443 HTTP/1.1\r\n\r\n", limit: 100, oneByte: true,
			wantLine: "CONNECT a:443 HTTP/1.1"},
		{name: "terminator starts at the limit", in: strings.Repeat("a", 10) + "\r\n\r\n", limit: 10,
			wantLine: strings.Repeat("a", 10)},
		{name: "terminator starts at the limit, byte by byte", in: strings.Repeat("a", 10) + "\r\n\r\n", limit: 10,
			oneByte: true, wantLine: strings.Repeat("a", 10)},
		{name: "terminator past the limit", in: strings.Repeat("a", 11) + "\r\n\r\n", limit: 10, wantErr: errHeadTooLong},
		{name: "terminator past the limit, byte by byte", in: strings.Repeat("a", 11) + "\r\n\r\n", limit: 10,
			oneByte: true, wantErr: errHeadTooLong},
		{name: "no terminator", in: strings.Repeat("a", 100), limit: 10, wantErr: errHeadTooLong},
		{name: "no terminator within 64 KiB", in: "CONNECT a:443 HTTP/1.1\r\nX: " + strings.Repeat("b", maxHead),
			limit: maxHead, wantErr: errHeadTooLong},
		{name: "EOF first", in: "CONNECT a:443 HTTP/1.1\r\n", limit: 100, wantErr: io.EOF},
		{name: "bare LF is not a terminator", in: "CONNECT a:443 HTTP/1.1\n\n", limit: 100, wantErr: io.EOF},
		{name: "CR LF CR is not a terminator", in: "CONNECT a:443 HTTP/1.1\r\n\rX\r\n\r\n", limit: 100, oneByte: true,
			wantLine: "CONNECT a:443 HTTP/1.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.in)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			line, rest, err := readHead(r, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if want := reduceLine(tc.wantLine); string(line) != string(want) || string(rest) != tc.wantRest {
				t.Fatalf("line %q rest %q, want %q %q", line, rest, want, tc.wantRest)
			}
		})
	}
}

// reduceLine is what readHead keeps of a request line.
func reduceLine(line string) []byte {
	var lr lineReducer
	lr.feed([]byte(line))
	return lr.line()
}

// TestLineReducer holds the reduction to its promise: parseRequest answers the reduced line
// as it answers the whole one, and the reduced line stays short however long the line.
func TestLineReducer(t *testing.T) {
	long := strings.Repeat("h", 253)
	zeros := func(n int) string { return strings.Repeat("0", n) }
	lines := []string{
		"CONNECT a:443 HTTP/1.1",
		"  CONNECT \t a:443 \xa0 HTTP/1.1  ",
		"CONNECTX a:443 HTTP/1.1",
		strings.Repeat("M", 1000) + " a:443 HTTP/1.1",
		"CONNECT a:443 HTTP/" + strings.Repeat("9", 1000),
		"CONNECT a:443 HTTPS" + strings.Repeat("9", 1000),
		"CONNECT a:443 HTTP/1.1 " + strings.Repeat("x ", 1000),
		"CONNECT " + long + ":443 HTTP/1.1",
		"CONNECT " + long + "h:443 HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "443 HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + " HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "65535 HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "65536 HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "443000 HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "443x HTTP/1.1",
		"CONNECT " + long + ":" + zeros(1000) + "443:443 HTTP/1.1",
		"CONNECT a:" + zeros(5000) + "443 HTTP/1.1",
		"CONNECT a:" + zeros(300) + "1" + zeros(300) + " HTTP/1.1",
		"CONNECT a:443" + zeros(300) + " HTTP/1.1",
		"CONNECT :" + zeros(300) + "443 HTTP/1.1",
		"CONNECT " + zeros(300) + ":443 HTTP/1.1",
		"CONNECT " + strings.Repeat("a", 1000) + " HTTP/1.1",
		"CONNECT " + strings.Repeat("[::1]", 100) + ":443 HTTP/1.1",
		"CONNECT a\xe9" + zeros(300) + ":443 HTTP/1.1",
		"CONNECT " + strings.Repeat("a", 250) + ":44" + zeros(300) + "3 HTTP/1.1",
		"CONNECT " + strings.Repeat("a", 250) + ":0" + zeros(300) + " HTTP/1.1",
		"CONNECT a:443",
		"GET http://a/ HTTP/1.1",
		"",
	}
	for _, line := range lines {
		checkReduced(t, line)
	}
	// Random lines shaped like requests, around the lengths where the reduction changes.
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(ss ...string) string { return ss[rng.IntN(len(ss))] }
	run := func(alphabet string, max int) string {
		var b strings.Builder
		for range rng.IntN(max + 1) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	outcomes := map[string]int{}
	for range 5000 {
		ws := func() string { return pick(" ", "\t", " \xa0 ", "\x85") }
		host := run("ab.:[]0", []int{3, 250, 260, 400}[rng.IntN(4)])
		if rng.IntN(3) == 0 {
			host = strings.Repeat("h", 240+rng.IntN(20))
		}
		port := strings.Repeat("0", []int{0, 1, 200, 300}[rng.IntN(4)]) + run("0123456789", 7) + pick("", "", "", "x", ":", "0:1")
		line := pick("", " ") + pick("CONNECT", "CONNECT", "GET", "CONNECTX") + ws() + host + ":" + port + ws() +
			pick("HTTP/1.1", "HTTP/", "HTTPS", "") + pick("", "", ws()+"extra")
		checkReduced(t, line)
		_, code := parseRequest([]byte(line))
		if len(line) > 300 {
			outcomes[code]++
		}
	}
	t.Logf("outcomes of the random lines over 300 bytes: %v", outcomes)
	if outcomes[""] == 0 || outcomes[statusBadRequest] == 0 || outcomes[statusNotAllowed] == 0 {
		t.Fatalf("the random lines over 300 bytes missed an outcome: %v", outcomes)
	}
}

func checkReduced(t *testing.T, line string) {
	t.Helper()
	reduced := reduceLine(line)
	if len(reduced) >= 300 {
		t.Fatalf("reduced %d bytes to %d", len(line), len(reduced))
	}
	want, wantCode := parseRequest([]byte(line))
	got, gotCode := parseRequest(reduced)
	if got != want || gotCode != wantCode {
		short := line
		if len(short) > 80 {
			short = short[:80] + "…"
		}
		t.Fatalf("%q (%d bytes) reduced to %q: parsed %+v %q, the whole line %+v %q", short, len(line), reduced, got, gotCode, want, wantCode)
	}
}

// FuzzLineReducer checks the reduction's promise on lines built from the bytes that matter:
// the fuzzer's string is expanded, each byte of it standing for a run of that byte, so that
// short inputs reach the long-token cases.
func FuzzLineReducer(f *testing.F) {
	for _, s := range []string{"CONNECT a:443 HTTP/1.1", "CONNECT a:\x80443 HTTP/1.1", "CONNECT \xffa:4\x904\x103 HTTP/1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= 0x80 && c != 0x85 && c != 0xa0 && i+1 < len(s) {
				// A byte with the high bit repeats the next byte (c & 0x7f) * 8 times.
				b.WriteString(strings.Repeat(s[i+1:i+2], int(c&0x7f)*8))
				i++
				continue
			}
			b.WriteByte(c)
		}
		checkReduced(t, b.String())
	})
}
