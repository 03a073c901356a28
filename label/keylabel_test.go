package label

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// allBytes is every control byte, DEL, the three JSON specials and a few non-ASCII code
// points, as one key component.
const allBytes = "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f" +
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f\"\\/é\u2028\uffff"

func TestEncodeKey(t *testing.T) {
	// Every want was produced by Python's base64.urlsafe_b64encode(json.dumps([...]).encode()).
	cases := []struct {
		name   string
		key    sandbox.Key
		want   string
		wantOK bool
	}{
		{name: "spec vector plain", key: sandbox.Key{Scope: "scope", ThreadID: "thread", AgentID: "agent"},
			want: "WyJzY29wZSIsICJ0aHJlYWQiLCAiYWdlbnQiLCAiIl0=", wantOK: true},
		{name: "spec vector escapes", key: sandbox.Key{Scope: "s \u2603", ThreadID: "t\n", AgentID: "a", CallID: "call / 1"},
			want: "WyJzIFx1MjYwMyIsICJ0XG4iLCAiYSIsICJjYWxsIC8gMSJd", wantOK: true},
		{name: "astral plane as surrogate pair", key: sandbox.Key{Scope: "\U0001F600"},
			want: "WyJcdWQ4M2RcdWRlMDAiLCAiIiwgIiIsICIiXQ==", wantOK: true},
		{name: "every escape", key: sandbox.Key{Scope: allBytes},
			want:   "WyJcdTAwMDBcdTAwMDFcdTAwMDJcdTAwMDNcdTAwMDRcdTAwMDVcdTAwMDZcdTAwMDdcYlx0XG5cdTAwMGJcZlxyXHUwMDBlXHUwMDBmXHUwMDEwXHUwMDExXHUwMDEyXHUwMDEzXHUwMDE0XHUwMDE1XHUwMDE2XHUwMDE3XHUwMDE4XHUwMDE5XHUwMDFhXHUwMDFiXHUwMDFjXHUwMDFkXHUwMDFlXHUwMDFmXHUwMDdmXCJcXC9cdTAwZTlcdTIwMjhcdWZmZmYiLCAiIiwgIiIsICIiXQ==",
			wantOK: true},
		{name: "budget inclusive", key: sandbox.Key{Scope: strings.Repeat("x", 3056)},
			want: base64.URLEncoding.EncodeToString([]byte(`["` + strings.Repeat("x", 3056) + `", "", "", ""]`)), wantOK: true},
		{name: "over budget", key: sandbox.Key{Scope: strings.Repeat("x", 3057)}},
		{name: "far over budget", key: sandbox.Key{AgentID: strings.Repeat("\u2603", 100_000)}},
		{name: "invalid UTF-8", key: sandbox.Key{Scope: "a", ThreadID: "\xff"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := EncodeKey(tc.key)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("got %q %v, want %q %v", got, ok, tc.want, tc.wantOK)
			}
			if !ok {
				return
			}
			if len(got) > KeyBudget {
				t.Fatalf("%d bytes over the budget", len(got))
			}
			if strings.TrimLeft(got, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=") != "" {
				t.Fatalf("%q leaves the label alphabet", got)
			}
			back, ok := DecodeKey(got)
			if !ok || back != tc.key {
				t.Fatalf("decoded %+v %v, want %+v", back, ok, tc.key)
			}
		})
	}
	if v, _ := EncodeKey(sandbox.Key{Scope: strings.Repeat("x", 3056)}); len(v) != KeyBudget {
		t.Fatalf("3056 x: %d bytes, want exactly %d", len(v), KeyBudget)
	}
}

func TestDecodeKeyLabel(t *testing.T) {
	b64 := func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		name   string
		value  string
		want   sandbox.Key
		wantOK bool
	}{
		{name: "compact JSON", value: b64(`["a","b","c","d"]`), want: sandbox.Key{Scope: "a", ThreadID: "b", AgentID: "c", CallID: "d"}, wantOK: true},
		{name: "white space", value: b64(" \t\n[ \"a\" ,\r\"b\",\"c\" , \"\" ]\n"), want: sandbox.Key{Scope: "a", ThreadID: "b", AgentID: "c"}, wantOK: true},
		{name: "raw UTF-8 and every escape", value: b64(`["☃\/\"\\\b\f\n\r\t\u00E9\ud83d\ude00","","",""]`),
			want: sandbox.Key{Scope: "☃/\"\\\b\f\n\r\té\U0001F600"}, wantOK: true},
		{name: "not base64", value: "!"},
		{name: "standard alphabet", value: "////"},
		{name: "unpadded", value: "WyJhIiwiYiIsImMiLCJkIl0"},
		{name: "line break inside", value: "WyJhIiwiYiIsImMi\nLCJkIl0="},
		{name: "object", value: "e30="},
		{name: "numbers", value: "WzEsMiwzXQ=="},
		{name: "empty array", value: "W10="},
		{name: "three elements", value: "WyJhIiwiYiIsImMiXQ=="},
		{name: "five elements", value: b64(`["a","b","c","d","e"]`)},
		{name: "null element", value: b64(`["a","b","c",null]`)},
		{name: "trailing comma", value: b64(`["a","b","c","d",]`)},
		{name: "trailing data", value: b64(`["a","b","c","d"]x`)},
		{name: "two arrays", value: b64(`["a","b","c","d"][]`)},
		{name: "raw control byte", value: b64("[\"a\x01\",\"b\",\"c\",\"d\"]")},
		{name: "bad escape", value: b64(`["\x41","b","c","d"]`)},
		{name: "short unicode escape", value: b64(`["\u12","b","c","d"]`)},
		{name: "lone high surrogate", value: b64(`["\ud83d","b","c","d"]`)},
		{name: "lone low surrogate", value: b64(`["\ude00","b","c","d"]`)},
		{name: "high then non-low", value: b64(`["\ud83d\u0041","b","c","d"]`)},
		{name: "invalid UTF-8", value: b64("[\"\xff\",\"b\",\"c\",\"d\"]")},
		{name: "unterminated string", value: b64(`["a","b","c","d]`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := DecodeKey(tc.value)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("got %+v %v, want %+v %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
