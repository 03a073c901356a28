package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// TestEgressRuleRefusals: every entry the grammar of EgressRule refuses is refused by NewSpec
// as invalid, with a reason that names what is wrong.
func TestEgressRuleRefusals(t *testing.T) {
	get := []string{"GET"}
	cases := []struct {
		name    string
		rule    EgressRule
		wantErr string
	}{
		{"empty host", EgressRule{Host: ""}, "is empty"},
		{"bare star", EgressRule{Host: "*"}, "bare '*'"},
		{"ipv4", EgressRule{Host: "10.0.0.1"}, "IPv4 literal"},
		{"ipv4 short form", EgressRule{Host: "127.1"}, "IPv4 literal"},
		{"ipv4 single number", EgressRule{Host: "2130706433"}, "IPv4 literal"},
		{"ipv4 hex", EgressRule{Host: "0x7f.0x1"}, "IPv4 literal"},
		{"ipv4 trailing dot", EgressRule{Host: "10.0.0.1."}, "IPv4 literal"},
		{"ipv4 pattern", EgressRule{Host: "10.*"}, "IPv4 literal"},
		{"numeric last label", EgressRule{Host: "example.123"}, "IPv4 literal"},
		{"ipv6", EgressRule{Host: "::1"}, "IPv6 literal"},
		{"ipv6 bracketed", EgressRule{Host: "[2001:db8::1]"}, "IPv6 literal"},
		{"ipv4-mapped ipv6", EgressRule{Host: "::ffff:10.0.0.1"}, "IPv6 literal"},
		{"host with port", EgressRule{Host: "pypi.org:443"}, "a port"},
		{"254 octets", EgressRule{Host: strings.Repeat("a", 250) + ".com"}, "longer than 253 octets"},
		{"whitespace", EgressRule{Host: "a b.example"}, "whitespace"},
		{"control byte", EgressRule{Host: "a\x01.example"}, "control byte"},
		{"comma", EgressRule{Host: "a.example,b.example"}, "comma"},
		{"url", EgressRule{Host: "https://a.example"}, "'://'"},
		{"lower-case method", EgressRule{Host: "a.example", Methods: []string{"get"}}, "upper-case HTTP tokens"},
		{"empty method", EgressRule{Host: "a.example", Methods: []string{""}}, "upper-case HTTP tokens"},
		{"method with space", EgressRule{Host: "a.example", Methods: []string{"GET POST"}}, "upper-case HTTP tokens"},
		{"method with slash", EgressRule{Host: "a.example", Methods: []string{"GET/1"}}, "upper-case HTTP tokens"},
		{"method with separator", EgressRule{Host: "a.example", Methods: []string{"GET,POST"}}, "upper-case HTTP tokens"},
		{"method with colon", EgressRule{Host: "a.example", Methods: []string{"GET:"}}, "upper-case HTTP tokens"},
		{"method non-ascii", EgressRule{Host: "a.example", Methods: []string{"GÉT"}}, "upper-case HTTP tokens"},
		{"method too long", EgressRule{Host: "a.example", Methods: []string{strings.Repeat("A", 33)}}, "upper-case HTTP tokens"},
		{"empty path", EgressRule{Host: "a.example", Methods: get, Paths: []string{""}}, "empty"},
		{"relative path", EgressRule{Host: "a.example", Paths: []string{"repos"}}, "starts with '/'"},
		{"double slash", EgressRule{Host: "a.example", Paths: []string{"/repos//acme"}}, "empty segment"},
		{"trailing slash", EgressRule{Host: "a.example", Paths: []string{"/repos/"}}, "empty segment"},
		{"dot segment", EgressRule{Host: "a.example", Paths: []string{"/repos/./acme"}}, "'..' segments"},
		{"dot-dot segment", EgressRule{Host: "a.example", Paths: []string{"/repos/../admin"}}, "'..' segments"},
		{"star inside segment", EgressRule{Host: "a.example", Paths: []string{"/repos/ac*"}}, "whole segment"},
		{"double star not last", EgressRule{Host: "a.example", Paths: []string{"/repos/**/issues"}}, "only as the last"},
		{"percent-encoded", EgressRule{Host: "a.example", Paths: []string{"/repos%41cme"}}, "percent-encoding"},
		{"encoded dot", EgressRule{Host: "a.example", Paths: []string{"/a%2Eb"}}, "percent-encoding"},
		{"encoded slash alone", EgressRule{Host: "a.example", Paths: []string{"/repos/%2F"}}, "empty, '.' or '..' piece"},
		{"encoded slash at a segment's end", EgressRule{Host: "a.example", Paths: []string{"/repos/acme%2F"}}, "empty, '.' or '..' piece"},
		{"encoded slash and dot-dot", EgressRule{Host: "a.example", Paths: []string{"/repos/acme%2F..%2Fadmin"}}, "empty, '.' or '..' piece"},
		{"encoded slash with a star", EgressRule{Host: "a.example", Paths: []string{"/repos/*%2Fx"}}, "whole segment"},
		{"query", EgressRule{Host: "a.example", Paths: []string{"/search?q=1"}}, "query or fragment"},
		{"fragment", EgressRule{Host: "a.example", Paths: []string{"/a#b"}}, "query or fragment"},
		{"backslash", EgressRule{Host: "a.example", Paths: []string{"/a\\b"}}, "not allowed"},
		{"space in path", EgressRule{Host: "a.example", Paths: []string{"/a b"}}, "not allowed"},
		{"comma in path", EgressRule{Host: "a.example", Paths: []string{"/a,b"}}, "not allowed"},
		{"non-ascii path", EgressRule{Host: "a.example", Paths: []string{"/é"}}, "not allowed"},
		{"shadow that narrows nothing", EgressRule{Host: "a.example", Shadow: true}, "would shadow nothing"},
		{"path too long", EgressRule{Host: "a.example", Paths: []string{"/" + strings.Repeat("a", 1024)}}, "longer than 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSpec("k", WithAllowlist(EgressRule{Host: "ok.example"}, tc.rule))
			var inv *InvalidArgumentError
			if !errors.As(err, &inv) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want *InvalidArgumentError containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestEgressRuleAccepts: names, patterns and rules people write today stay valid.
func TestEgressRuleAccepts(t *testing.T) {
	for _, r := range []EgressRule{
		{Host: "pypi.org"}, {Host: "*.pythonhosted.org"}, {Host: "files-1.example"}, {Host: "a.example."},
		{Host: "ipv6.example"}, {Host: "v4.10.example"}, {Host: "0xdead.example"}, {Host: "x" + strings.Repeat(".a", 126)},
		{Host: "api.github.com", Methods: []string{"GET", "HEAD", "PROPFIND", "M-SEARCH", "X_Y.1~"}},
		{Host: "api.github.com", Paths: []string{"/", "/**", "/repos/acme/**", "/repos/*/issues", "/v1/a:b@c", "/v1/~user/(x)+'=!$&"}},
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/" + strings.Repeat("a", 1016)}},
		{Host: "gitlab.example", Methods: []string{"GET"}, Paths: []string{"/api/v4/projects/acme%2Fwidgets/**", "/p/a%2fb%2Fc"}},
	} {
		if _, err := NewSpec("k", WithAllowlist(r)); err != nil {
			t.Errorf("%+v refused: %v", r, err)
		}
	}
}

func TestEgressRuleNormalisesAndConflicts(t *testing.T) {
	s, err := NewSpec("k", WithAllowlist(
		EgressRule{Host: "Api.Example", Methods: []string{"POST", "GET"}, Paths: []string{"/b/**", "/a", "/a"}},
		EgressRule{Host: "api.example", Methods: []string{"GET", "POST", "GET"}, Paths: []string{"/a", "/b/**"}},
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.EgressAllow) != 1 || strings.Join(s.EgressAllow[0].Paths, " ") != "/a /b/**" {
		t.Fatalf("equivalent entries must collapse with sorted paths: %+v", s.EgressAllow)
	}
	s, err = NewSpec("k", WithAllowlist(EgressRule{Host: "a", Paths: []string{"/p/acme%2fx"}}, EgressRule{Host: "a", Paths: []string{"/p/acme%2Fx"}}))
	if err != nil || strings.Join(s.EgressAllow[0].Paths, " ") != "/p/acme%2Fx" {
		t.Fatalf("an encoded slash is spelled %%2F whatever its case: %+v (%v)", s.EgressAllow, err)
	}
	if !s.RequiredCapabilities().Has(EgressMethods) {
		t.Fatal("an inspecting rule requires egress_methods")
	}
	pathsOnly, _ := NewSpec("k", WithAllowlist(EgressRule{Host: "a", Paths: []string{"/x"}}))
	if !pathsOnly.RequiredCapabilities().Has(EgressMethods) {
		t.Fatal("a rule with paths only still asks for inspection")
	}
	_, err = NewSpec("k", WithAllowlist(EgressRule{Host: "a", Paths: []string{"/x"}}, EgressRule{Host: "A", Paths: []string{"/y"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "twice with different paths (/x and /y)") {
		t.Fatalf("err = %v, want the path conflict", err)
	}
	_, err = NewSpec("k", WithAllowlist(EgressRule{Host: "a", Paths: []string{"/y"}, Shadow: true}, EgressRule{Host: "a", Paths: []string{"/y"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "once in shadow and once enforcing") {
		t.Fatalf("err = %v, want the shadow conflict", err)
	}
	_, err = NewSpec("k", WithAllowlist(EgressRule{Host: "a"}, EgressRule{Host: "a", Paths: []string{"/y"}}))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "(every path and /y)") {
		t.Fatalf("err = %v, want tunnel-only against paths refused", err)
	}
}

// TestEgressRuleCanonical: a tunnel-only rule's identity is its host (so every existing
// allowlist keeps its container names), and changing a method or path changes it.
func TestEgressRuleCanonical(t *testing.T) {
	ids := func(rules ...EgressRule) string {
		s, err := NewSpec("k", WithAllowlist(rules...))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(EgressIdentities(s.EgressAllow), ",")
	}
	if got := ids(Hosts("b.example", "a.example")...); got != "b.example,a.example" {
		t.Fatalf("tunnel-only identities = %q, want the hosts", got)
	}
	base := ids(EgressRule{Host: "a", Methods: []string{"GET"}, Paths: []string{"/x/**"}})
	for _, other := range []EgressRule{
		{Host: "a"}, {Host: "a", Methods: []string{"GET", "POST"}, Paths: []string{"/x/**"}},
		{Host: "a", Methods: []string{"GET"}, Paths: []string{"/x"}}, {Host: "a", Methods: []string{"GET"}},
		{Host: "a", Methods: []string{"GET"}, Paths: []string{"/x/**"}, Shadow: true},
	} {
		if got := ids(other); got == base || strings.Contains(got, ",") {
			t.Fatalf("%+v has identity %q (base %q): want a different one without a comma", other, got, base)
		}
	}
}

func TestMatchEgressPath(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/", "/", true},
		{"/", "/a", false},
		{"/**", "/", true},
		{"/**", "/a/b/c", true},
		{"/repos/acme/**", "/repos/acme", true},
		{"/repos/acme/**", "/repos/acme/", true},
		{"/repos/acme/**", "/repos/acme/x/y", true},
		{"/repos/acme/**", "/repos/acmex", false},
		{"/repos/acme/**", "/repos/acmex/y", false},
		{"/repos/acme/**", "/repos", false},
		{"/repos/acme/**", "/Repos/acme/x", false},
		{"/repos/*/issues", "/repos/acme/issues", true},
		{"/repos/*/issues", "/repos//issues", false},
		{"/repos/*/issues", "/repos/acme/issues/1", false},
		{"/repos/*/issues", "/repos/a/b/issues", false},
		{"/repos/*", "/repos/", false},
		{"/repos/*", "/repos", false},
		{"/v1/models", "/v1/models", true},
		{"/v1/models", "/v1/models/", false},
		{"/v1/models", "/v1/model", false},
		{"/v1/models", "v1/models", false},
		{"/v1/models", "", false},
		{"/repos/acme/**", "/repos/acme%2Fx", false},
		{"/repos/acme/**", "/repos/acme/x%2Fy/z", true},
		{"/repos/*/issues", "/repos/acme%2Fx/issues", false},
		{"/repos/acme%2Fx/issues", "/repos/acme%2Fx/issues", true},
		{"/repos/acme%2Fx/issues", "/repos/acme/x/issues", false},
		{"/repos/acme/x/issues", "/repos/acme%2Fx/issues", false},
		{"/repos/*", "/repos/acme%2Fx", false},
	}
	for _, tc := range cases {
		if got := MatchEgressPath(tc.pattern, tc.path); got != tc.want {
			t.Errorf("MatchEgressPath(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}
