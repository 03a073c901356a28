package egresslog

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

func dec(code sandbox.EgressDecisionCode, host string, port int) sandbox.EgressDecision {
	return sandbox.EgressDecision{Decision: code, Host: host, Port: port}
}

func TestParseLog(t *testing.T) {
	allowA := dec(sandbox.DecisionAllow, "a.example", 443)
	ready := "listening on 3128; allowing: a.example\n"
	cases := []struct {
		name  string
		log   string
		opts  []ParseOpt
		want  []sandbox.EgressDecision
		wantT Truncation
	}{
		{name: "empty", log: ""},
		{name: "readiness only", log: ready},
		{name: "each verb", log: ready + "ALLOW a.example:443\nDENY Evil.Example:443\nDENY-NONGLOBAL b:443\nUNREACHABLE c:443\n",
			want: []sandbox.EgressDecision{allowA, dec(sandbox.DecisionDeny, "Evil.Example", 443),
				dec(sandbox.DecisionDenyNonGlobal, "b", 443), dec(sandbox.DecisionUnreachable, "c", 443)}},
		{name: "ipv6 split at last colon", log: "ALLOW ::1:443\nDENY [2001:db8::1]:443\n",
			want: []sandbox.EgressDecision{dec(sandbox.DecisionAllow, "::1", 443), dec(sandbox.DecisionDeny, "[2001:db8::1]", 443)}},
		{name: "reference proxy ports", log: "DENY a:80\nDENY a:99999\nDENY a:0443\n",
			want: []sandbox.EgressDecision{dec(sandbox.DecisionDeny, "a", 80), dec(sandbox.DecisionDeny, "a", 99999), dec(sandbox.DecisionDeny, "a", 443)}},
		{name: "noise skipped", log: "allow a:443\nALLOW\nALLOW a\nALLOW a:\nALLOW a:4x3\nALLOW :443\nPERMIT a:443\nALLOW a:+443\nALLOW a:99999999999999999999999\n\n" +
			"ALLOW a.example:443\n", want: []sandbox.EgressDecision{allowA}},
		{name: "CRLF and no final newline", log: "ALLOW a.example:443\r\nALLOW a.example:443", want: []sandbox.EgressDecision{allowA, allowA}},
		{name: "bound exact", log: "ALLOW a.example:443\nALLOW a.example:443\nALLOW a.example:443\n", opts: []ParseOpt{WithTailLines(3)},
			want: []sandbox.EgressDecision{allowA, allowA, allowA}},
		{name: "bound exact with readiness", log: ready + "ALLOW a.example:443\nALLOW a.example:443\n", opts: []ParseOpt{WithTailLines(3)},
			want: []sandbox.EgressDecision{allowA, allowA}},
		{name: "full tail plus readiness", log: ready + "ALLOW a.example:443\nALLOW a.example:443\nALLOW a.example:443\n", opts: []ParseOpt{WithTailLines(3)},
			want: []sandbox.EgressDecision{allowA, allowA, allowA}, wantT: Truncation{Lines: true}},
		{name: "over bound keeps newest", log: "DENY old:443\nDENY mid:443\nALLOW a.example:443\n", opts: []ParseOpt{WithTailLines(2)},
			want: []sandbox.EgressDecision{dec(sandbox.DecisionDeny, "mid", 443), allowA}, wantT: Truncation{Lines: true}},
		{name: "byte cap drops partial line", log: "ALLOW a.example:443\nDENY b.example:443\n", opts: []ParseOpt{WithMaxBytes(25)},
			want: []sandbox.EgressDecision{allowA}, wantT: Truncation{Bytes: true}},
		{name: "byte cap on a line end", log: "ALLOW a.example:443\nDENY b.example:443\n", opts: []ParseOpt{WithMaxBytes(20)},
			want: []sandbox.EgressDecision{allowA}, wantT: Truncation{Bytes: true}},
		{name: "byte cap exactly the log", log: "ALLOW a.example:443\n", opts: []ParseOpt{WithMaxBytes(20)},
			want: []sandbox.EgressDecision{allowA}},
		{name: "byte cap inside the first line", log: "ALLOW a.example:443\n", opts: []ParseOpt{WithMaxBytes(10)},
			wantT: Truncation{Bytes: true}},
		{name: "without timestamps a stamped line is noise", log: "2024-05-01T10:00:00.000000001Z ALLOW a.example:443\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, tr, err := ParseLog(strings.NewReader(tc.log), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(tc.want) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decisions %+v, want %+v", got, tc.want)
			}
			if tr != tc.wantT {
				t.Fatalf("truncation %+v, want %+v", tr, tc.wantT)
			}
		})
	}
}

func TestParseLogTimestamps(t *testing.T) {
	at1 := time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.UTC)
	at2 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("", 2*3600))
	log := "2024-05-01T10:00:00.123456789Z listening on 3128; allowing: a.example\n" +
		"2024-05-01T10:00:00.123456789Z ALLOW a.example:443\n" +
		"ALLOW unstamped.example:443\n" +
		"yesterday DENY b.example:443\n" +
		"2024-05-01T12:00:00+02:00 DENY ::1:443\n" +
		"2024-05-01T10:00:00Z\n"
	got, tr, err := ParseLog(strings.NewReader(log), WithTimestamps())
	if err != nil || tr.Truncated() {
		t.Fatalf("%+v %v", tr, err)
	}
	want := []sandbox.EgressDecision{
		{Decision: sandbox.DecisionAllow, Host: "a.example", Port: 443, At: at1},
		{Decision: sandbox.DecisionDeny, Host: "::1", Port: 443, At: at2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Decision != want[i].Decision || got[i].Host != want[i].Host || got[i].Port != want[i].Port || !got[i].At.Equal(want[i].At) {
			t.Fatalf("decision %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseLogDefaultBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(FormatReady(3128, []string{"a.example"}))
	for i := range TailLines {
		fmt.Fprintf(&b, "DENY h%d.example:443\n", i)
	}
	// The drain asks for TailLines+1 lines: readiness plus a full tail of decisions.
	got, tr, err := ParseLog(strings.NewReader(b.String()))
	if err != nil || len(got) != TailLines || !tr.Lines || tr.Bytes {
		t.Fatalf("%d decisions, %+v, %v", len(got), tr, err)
	}
	if got[0].Host != "h0.example" || got[TailLines-1].Host != fmt.Sprintf("h%d.example", TailLines-1) {
		t.Fatalf("first %q, last %q", got[0].Host, got[TailLines-1].Host)
	}

	// A stream longer than LogMaxBytes is not read past the cap.
	r := &countingReader{r: strings.NewReader(strings.Repeat("DENY x.example:443\n", LogMaxBytes/19+100))}
	_, tr, err = ParseLog(r, WithTailLines(1<<30))
	if err != nil || !tr.Bytes {
		t.Fatalf("%+v %v", tr, err)
	}
	if r.n > LogMaxBytes+1 {
		t.Fatalf("read %d bytes, cap %d", r.n, LogMaxBytes)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestParseLogReadError(t *testing.T) {
	boom := errors.New("engine went away")
	r := io.MultiReader(strings.NewReader("ALLOW a.example:443\nDENY b.exa"), &failReader{boom})
	got, tr, err := ParseLog(r)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if len(got) != 1 || got[0].Host != "a.example" || tr.Truncated() {
		t.Fatalf("decisions %+v, %+v", got, tr)
	}
}

type failReader struct{ err error }

func (f *failReader) Read([]byte) (int, error) { return 0, f.err }

func TestParseLogOptions(t *testing.T) {
	for _, opt := range []ParseOpt{WithTailLines(0), WithMaxBytes(-1)} {
		if _, _, err := ParseLog(strings.NewReader(""), opt); err == nil {
			t.Fatal("invalid option accepted")
		}
	}
	if _, _, err := ParseLog(strings.NewReader(""), nil); err != nil {
		t.Fatalf("nil option: %v", err)
	}
}
