package paths_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		name, input, want string
	}{
		{"empty is dot", "", "."},
		{"root", "/", "/"},
		{"double slashes collapse", "//a//b/", "/a/b"},
		{"leading double slash collapses", "//x", "/x"},
		{"dots go", "/a/./b/.", "/a/b"},
		{"dotdot resolves lexically", "/a/b/../c", "/a/c"},
		{"never above root", "/../..", "/"},
		{"never above root mid-path", "/a/../../b", "/b"},
		{"relative keeps leading dotdot", "a/../..", ".."},
		{"three dots is a name", "/w/...", "/w/..."},
		{"dot", ".", "."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.Normalize(tc.input); got != tc.want {
				t.Fatalf("Normalize(%q) = %q, want %q", tc.input, got, tc.want)
			}
			if again := paths.Normalize(tc.want); again != tc.want {
				t.Fatalf("Normalize is not idempotent on %q: %q", tc.want, again)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	cases := []struct {
		name, base, p, want string
	}{
		{"relative appends", "/w", "a", "/w/a"},
		{"absolute replaces the base", "/w", "/etc/x", "/etc/x"},
		{"empty names the base", "/w", "", "/w"},
		{"dot names the base", "/w", ".", "/w"},
		{"dotdot climbs", "/w", "../x", "/x"},
		{"empty base", "", "a", "a"},
		{"result is normalised", "/w/", "a//b/./c/", "/w/a/b/c"},
		{"root base", "/", "a", "/a"},
		{"relative base", "work", "a", "work/a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.Join(tc.base, tc.p); got != tc.want {
				t.Fatalf("Join(%q, %q) = %q, want %q", tc.base, tc.p, got, tc.want)
			}
		})
	}
}

func TestRelativeTo(t *testing.T) {
	cases := []struct {
		name, p, base string
		want          string
		wantOK        bool
	}{
		{"equal is empty", "/w", "/w", "", true},
		{"child", "/w/a", "/w", "a", true},
		{"grandchild", "/w/a/b", "/w", "a/b", true},
		{"sibling sharing a prefix is outside", "/w-outside", "/w", "", false},
		{"sibling directory sharing a prefix is outside", "/w/sub2", "/w/sub", "", false},
		{"dotdot resolves before comparing", "/w/../etc", "/w", "", false},
		{"parent is outside", "/w", "/w/a", "", false},
		{"root base", "/a", "/", "a", true},
		{"root equals root", "/", "/", "", true},
		{"base with trailing slash", "/w/a/../b", "/w/", "b", true},
		{"unnormalised inputs", "/w//a/./b", "/w/.", "a/b", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := paths.RelativeTo(tc.p, tc.base)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("RelativeTo(%q, %q) = %q, %v, want %q, %v", tc.p, tc.base, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// confineCases are protocol §6.1–§6.2's vectors; the fuzz target is seeded with them too.
var confineCases = []struct {
	name    string
	p, wd   string
	want    string
	wantErr error
	reason  string // a substring of NotConfinedError.Reason
}{
	{"relative file", "a.txt", "/w", "/w/a.txt", nil, ""},
	{"dotdot escapes", "../etc", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"absolute dotdot escapes", "/w/../etc", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"dotdot through a child escapes", "sub/../../etc", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"dotdot back inside stays", "sub/../a", "/w", "/w/a", nil, ""},
	{"sibling sharing a prefix", "/w-outside/secret.txt", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"sibling sharing a prefix, relative", "../w-outside/x", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"sibling directory sharing a prefix", "/w/sub2/x", "/w/sub", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"sibling directory sharing a prefix, relative", "../sub2", "/w/sub", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"absolute inside is accepted", work + "/real/inside.txt", work, work + "/real/inside.txt", nil, ""},
	{"absolute elsewhere", "/etc/passwd", "/w", "", &sandbox.NotConfinedError{}, "resolves outside working directory"},
	{"dot names the working directory", ".", "/w", "/w", nil, ""},
	{"empty names the working directory", "", "/w", "/w", nil, ""},
	{"absolute working directory itself", "/w", "/w", "/w", nil, ""},
	{"backslash", `a\b`, "/w", "", &sandbox.NotConfinedError{}, "not a separator"},
	{"backslash dotdot", `..\etc`, "/w", "", &sandbox.NotConfinedError{}, "not a separator"},
	{"backslash alone", `\`, "/w", "", &sandbox.NotConfinedError{}, "not a separator"},
	{"backslash in the working directory", "a", `/w\x`, "", &sandbox.NotConfinedError{}, "not a separator"},
	{"relative working directory", "a", "work", "", &sandbox.NotConfinedError{}, "not absolute"},
	{"empty working directory", "a", "", "", &sandbox.NotConfinedError{}, "not absolute"},
	{"slashes and dots collapse", "a//b/./c", "/w/", "/w/a/b/c", nil, ""},
	{"down and up", "x/..", "/w", "/w", nil, ""},
	{"root working directory", "a", "/", "/a", nil, ""},
	{"root working directory, absolute", "/etc", "/", "/etc", nil, ""},
	{"root working directory, dotdot", "..", "/", "/", nil, ""},
	{"unnormalised working directory", work + "/x", work + "/.", work + "/x", nil, ""},
	{"three dots is a name", "...", "/w", "/w/...", nil, ""},
	{"dotdot prefix is a name", "..foo", "/w", "/w/..foo", nil, ""},
	{"maf-sandbox base", "out/file", work, work + "/out/file", nil, ""},
}

func TestConfineResolve(t *testing.T) {
	for _, tc := range confineCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := paths.ConfineResolve(tc.p, tc.wd)
			checkErr(t, err, tc.wantErr)
			var nc *sandbox.NotConfinedError
			if errors.As(err, &nc) && !strings.Contains(nc.Reason, tc.reason) {
				t.Fatalf("reason %q does not say %q", nc.Reason, tc.reason)
			}
			if got != tc.want {
				t.Fatalf("ConfineResolve(%q, %q) = %q, want %q", tc.p, tc.wd, got, tc.want)
			}
		})
	}
}

func TestResolveWorkDir(t *testing.T) {
	cases := []struct {
		name, base, wd, want string
	}{
		{"dot names the base", work, ".", work},
		{"empty names the base", work, "", work},
		{"relative resolves beneath the base", work, "call-1/sub", work + "/call-1/sub"},
		{"absolute is accepted as given", work, "/srv/data/", "/srv/data"},
		{"base is normalised", work + "//", ".", work},
		{"dotdot is lexical", work, "../other", "/maf-sandbox/other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.ResolveWorkDir(tc.base, tc.wd); got != tc.want {
				t.Fatalf("ResolveWorkDir(%q, %q) = %q, want %q", tc.base, tc.wd, got, tc.want)
			}
		})
	}
}
