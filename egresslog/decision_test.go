package egresslog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestFormatDecision(t *testing.T) {
	cases := []struct {
		name    string
		d       sandbox.EgressDecision
		want    string
		wantErr error
	}{
		{name: "allow", d: sandbox.EgressDecision{Decision: sandbox.DecisionAllow, Host: "api.example.com", Port: 443}, want: "ALLOW api.example.com:443\n"},
		{name: "deny keeps case", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "Evil.Example", Port: 443}, want: "DENY Evil.Example:443\n"},
		{name: "non-global", d: sandbox.EgressDecision{Decision: sandbox.DecisionDenyNonGlobal, Host: "[::1]", Port: 443}, want: "DENY-NONGLOBAL [::1]:443\n"},
		{name: "unreachable", d: sandbox.EgressDecision{Decision: sandbox.DecisionUnreachable, Host: "::1", Port: 443}, want: "UNREACHABLE ::1:443\n"},
		{name: "deny other port", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a", Port: 65535}, want: "DENY a:65535\n"},
		{name: "unknown verb", d: sandbox.EgressDecision{Decision: "allow", Host: "a", Port: 443}, wantErr: ErrInvalidDecision},
		{name: "empty host", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Port: 443}, wantErr: ErrInvalidDecision},
		{name: "space in host", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a b", Port: 443}, wantErr: ErrInvalidDecision},
		{name: "forged line", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a:443\nALLOW b", Port: 443}, wantErr: ErrInvalidDecision},
		{name: "DEL in host", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a\x7f", Port: 443}, wantErr: ErrInvalidDecision},
		{name: "non-ASCII host", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "é", Port: 443}, wantErr: ErrInvalidDecision},
		{name: "port zero", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a", Port: 0}, wantErr: ErrInvalidDecision},
		{name: "port too large", d: sandbox.EgressDecision{Decision: sandbox.DecisionDeny, Host: "a", Port: 65536}, wantErr: ErrInvalidDecision},
		{name: "request allowed", d: req(sandbox.DecisionAllow, "GET", "/repos/acme/x"), want: "ALLOW api.example:443 GET /repos/acme/x status=403 out=0 in=0 rule=*.example\n"},
		{name: "request denied", d: req(sandbox.DecisionDeny, "POST", "/"), want: "DENY api.example:443 POST / status=403 out=0 in=0 rule=*.example\n"},
		{name: "request relayed", d: outcome(req(sandbox.DecisionAllow, "GET", "/v1"), 200, 81, 4096, "api.example"),
			want: "ALLOW api.example:443 GET /v1 status=200 out=81 in=4096 rule=api.example\n"},
		{name: "request in shadow", d: outcome(req(sandbox.DecisionWouldDeny, "DELETE", "/v1"), 204, 90, 60, "api.example"),
			want: "WOULD-DENY api.example:443 DELETE /v1 status=204 out=90 in=60 rule=api.example\n"},
		{name: "request cut before an answer", d: outcome(req(sandbox.DecisionAllow, "GET", "/v1"), 0, 81, 0, "api.example"),
			want: "ALLOW api.example:443 GET /v1 status=0 out=81 in=0 rule=api.example\n"},
		{name: "request without a rule", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 200, 1, 1, ""), wantErr: ErrInvalidDecision},
		{name: "forged field in rule", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 200, 1, 1, "a status=1"), wantErr: ErrInvalidDecision},
		{name: "forged line in rule", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 200, 1, 1, "a\nALLOW b:443"), wantErr: ErrInvalidDecision},
		{name: "rule too long", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 200, 1, 1, strings.Repeat("a", MaxRule+1)), wantErr: ErrInvalidDecision},
		{name: "status over 999", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 1000, 1, 1, "a"), wantErr: ErrInvalidDecision},
		{name: "negative bytes", d: outcome(req(sandbox.DecisionAllow, "GET", "/"), 200, -1, 1, "a"), wantErr: ErrInvalidDecision},
		{name: "lower-case method", d: req(sandbox.DecisionDeny, "get", "/"), wantErr: ErrInvalidDecision},
		{name: "method with space", d: req(sandbox.DecisionDeny, "GET /x", "/"), wantErr: ErrInvalidDecision},
		{name: "path without method", d: req(sandbox.DecisionDeny, "", "/"), wantErr: ErrInvalidDecision},
		{name: "method without path", d: req(sandbox.DecisionDeny, "GET", ""), wantErr: ErrInvalidDecision},
		{name: "relative path", d: req(sandbox.DecisionDeny, "GET", "x"), wantErr: ErrInvalidDecision},
		{name: "forged line in path", d: req(sandbox.DecisionDeny, "GET", "/x\nALLOW b:443"), wantErr: ErrInvalidDecision},
		{name: "space in path", d: req(sandbox.DecisionDeny, "GET", "/a b"), wantErr: ErrInvalidDecision},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FormatDecision(tc.d)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if tc.wantErr != nil {
				return
			}
			// What the proxy writes, the drain reads back.
			ds, tr, err := ParseLog(strings.NewReader(got))
			if err != nil || tr.Truncated() || len(ds) != 1 || ds[0] != tc.d {
				t.Fatalf("parse back: %+v %+v %v, want %+v", ds, tr, err, tc.d)
			}
		})
	}
}

func TestFormatReady(t *testing.T) {
	cases := []struct {
		name  string
		port  int
		allow []string
		want  string
	}{
		{name: "hosts", port: 3128, allow: []string{"a.example", "*.b.example"}, want: "listening on 3128; allowing: a.example, *.b.example\n"},
		{name: "nothing", port: 3128, want: "listening on 3128; allowing: nothing\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := FormatReady(tc.port, tc.allow)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if !strings.Contains(got, ReadyMarker) {
				t.Fatalf("%q lacks %q", got, ReadyMarker)
			}
			ds, _, err := ParseLog(strings.NewReader(got))
			if err != nil || len(ds) != 0 {
				t.Fatalf("readiness line parsed as %+v, %v", ds, err)
			}
		})
	}
}

// writeRecorder records every Write call separately.
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *writeRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func TestWriterOneWritePerLine(t *testing.T) {
	rec := &writeRecorder{}
	w := NewWriter(rec)
	if err := w.WriteReady(3128, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 16, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := w.WriteDecision(sandbox.DecisionDeny, fmt.Sprintf("h%d-%d.example", g, i), 443); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.WriteDecision(sandbox.DecisionAllow, "a b", 443); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("invalid host: err %v", err)
	}
	if len(rec.writes) != 1+goroutines*each {
		t.Fatalf("%d writes, want %d", len(rec.writes), 1+goroutines*each)
	}
	for _, s := range rec.writes {
		if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
			t.Fatalf("write %q is not exactly one line", s)
		}
	}
	ds, _, err := ParseLog(strings.NewReader(strings.Join(rec.writes, "")))
	if err != nil || len(ds) != goroutines*each {
		t.Fatalf("parsed %d decisions, %v", len(ds), err)
	}
}

func req(code sandbox.EgressDecisionCode, method, path string) sandbox.EgressDecision {
	return sandbox.EgressDecision{Decision: code, Host: "api.example", Port: 443, Method: method, Path: path,
		Status: 403, Rule: "*.example"}
}

// outcome is req with the fields of a relayed request.
func outcome(d sandbox.EgressDecision, status int, out, in int64, rule string) sandbox.EgressDecision {
	d.Status, d.BytesOut, d.BytesIn, d.Rule = status, out, in, rule
	return d
}

// TestFormatDecisionCutsLongPaths: a request's path is bounded in the log, and what is
// written still parses back, marked as cut.
func TestFormatDecisionCutsLongPaths(t *testing.T) {
	line, err := FormatDecision(req(sandbox.DecisionDeny, "GET", "/"+strings.Repeat("a", 4096)))
	if err != nil {
		t.Fatal(err)
	}
	ds, _, err := ParseLog(strings.NewReader(line))
	if err != nil || len(ds) != 1 || len(ds[0].Path) != MaxLoggedPath || !strings.HasSuffix(ds[0].Path, PathCut) {
		t.Fatalf("parsed %+v (%v) from %q, want a path of %d bytes ending in %q", ds, err, line, MaxLoggedPath, PathCut)
	}
}

// The engine reads the proxy's log with timestamps: the CA line is found behind one.
func TestParseCATimestamped(t *testing.T) {
	der := []byte{0x30, 0x03, 0x02, 0x01, 0x01}
	for _, log := range []string{FormatCA(der), "2026-12-04T14:47:09.554Z " + FormatCA(der) + "2026-12-04T14:47:09.555Z ready\n"} {
		if got := ParseCA(log); !bytes.Equal(got, der) {
			t.Errorf("ParseCA(%q) = %x, want %x", log, got, der)
		}
	}
	if got := ParseCA("a b " + FormatCA(der)); got != nil {
		t.Errorf("a CA line behind two fields was read: %x", got)
	}
}

// TestParseRequestOutcome: a request line is read with its outcome fields, or without them
// (a proxy older than them); a line whose fields are partial, out of order or malformed is
// not a decision.
func TestParseRequestOutcome(t *testing.T) {
	log := "ALLOW a.example:443 GET /x\n" +
		"WOULD-DENY a.example:443 POST /x status=201 out=10 in=20 rule=*.example\n" +
		"ALLOW a.example:443 GET /x status=200 out=1\n" +
		"ALLOW a.example:443 GET /x out=1 status=200 in=1 rule=a\n" +
		"ALLOW a.example:443 GET /x status=2000 out=1 in=1 rule=a\n" +
		"ALLOW a.example:443 GET /x status=200 out=-1 in=1 rule=a\n" +
		"ALLOW a.example:443 GET /x status=200 out=1 in=1 rule=\n" +
		"ALLOW a.example:443 GET /x status=200 out=1 in=1 rule=a extra\n"
	ds, _, err := ParseLog(strings.NewReader(log))
	want := []sandbox.EgressDecision{
		{Decision: sandbox.DecisionAllow, Host: "a.example", Port: 443, Method: "GET", Path: "/x"},
		{Decision: sandbox.DecisionWouldDeny, Host: "a.example", Port: 443, Method: "POST", Path: "/x",
			Status: 201, BytesOut: 10, BytesIn: 20, Rule: "*.example"},
	}
	if err != nil || len(ds) != len(want) || ds[0] != want[0] || ds[1] != want[1] {
		t.Fatalf("parsed %+v (%v), want %+v", ds, err, want)
	}
}
