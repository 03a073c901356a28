package proxy

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		name, host, pattern string
		want                bool
	}{
		{name: "exact", host: "api.example.com", pattern: "api.example.com", want: true},
		{name: "exact is case-insensitive", host: "API.Example.COM", pattern: "api.EXAMPLE.com", want: true},
		{name: "exact is whole", host: "api.example.com.evil", pattern: "api.example.com"},
		{name: "wildcard one label", host: "a.example.com", pattern: "*.example.com", want: true},
		{name: "wildcard crosses dots", host: "a.b.example.com", pattern: "*.example.com", want: true},
		{name: "wildcard needs the dot", host: "example.com", pattern: "*.example.com"},
		{name: "wildcard suffix attack", host: "evilexample.com", pattern: "*.example.com"},
		{name: "wildcard case", host: "A.EXAMPLE.com", pattern: "*.Example.Com", want: true},
		{name: "star alone allows all", host: "anything.at.all", pattern: "*", want: true},
		{name: "question one char", host: "a1.example", pattern: "a?.example", want: true},
		{name: "question not two", host: "a12.example", pattern: "a?.example"},
		{name: "class", host: "b.example", pattern: "[abc].example", want: true},
		{name: "negated class", host: "d.example", pattern: "[!abc].example", want: true},
		{name: "negated class refuses", host: "a.example", pattern: "[!abc].example"},
		{name: "caret is not negation", host: "a.example", pattern: "[^b].example"},
		{name: "slash is an ordinary character", host: "a/b", pattern: "*", want: true},
		{name: "no escape character", host: `\x`, pattern: `\*`, want: true},
		{name: "unclosed bracket is literal", host: "[a", pattern: "[a", want: true},
		{name: "bracketed ipv6 literal", host: "[::1]", pattern: "[::1]"},
		{name: "ipv6 literal exact", host: "::1", pattern: "::1", want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Match(tc.host, tc.pattern); got != tc.want {
				t.Fatalf("Match(%q, %q) = %v, want %v", tc.host, tc.pattern, got, tc.want)
			}
		})
	}
}

// TestMatchPythonParity checks Match against answers recorded from Python's fnmatchcase,
// whose semantics the reference proxy has, on the awkward corners of character classes.
func TestMatchPythonParity(t *testing.T) {
	f, err := os.Open("testdata/fnmatch.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("bad line %q", line)
		}
		if got, want := Match(f[1], f[0]), f[2] == "1"; got != want {
			t.Errorf("Match(%q, %q) = %v, Python says %v", f[1], f[0], got, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d vectors", n)
	}
}

func BenchmarkMatchWorstCase(b *testing.B) {
	host := strings.Repeat("a", 253)
	p := compilePattern(strings.Repeat("*a", 30) + "b")
	for b.Loop() {
		if p.match(host) {
			b.Fatal("matched")
		}
	}
}
