package paths_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// FuzzConfineResolve checks that no input confines to a path outside its working directory:
// whenever ConfineResolve succeeds, the result is the normalised working directory or lies
// below it, is absolute and normalised, holds no ".." segment and no backslash, and agrees
// with an independent segment-stack resolver. A refusal is always a NotConfinedError, or an
// InvalidArgumentError for a path no Linux call could take (a NUL byte, too long).
// Normalize must be idempotent on every input.
func FuzzConfineResolve(f *testing.F) {
	for _, tc := range confineCases {
		f.Add(tc.p, tc.wd)
	}
	for _, seed := range [][2]string{
		{"../w-outside", "/w"}, {"/w/../w-outside", "/w/"}, {"a/../../..", "/"}, {"//x//..//..", "//w"},
		{"./.././w/x", "/w"}, {"/", "/w"}, {"/w/.", "/w"}, {".../..", "/w"}, {"x\x00/..", "/w"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, wd string) {
		for _, s := range []string{p, wd} {
			n := paths.Normalize(s)
			if again := paths.Normalize(n); again != n {
				t.Fatalf("Normalize is not idempotent: %q -> %q -> %q", s, n, again)
			}
		}
		r, err := paths.ConfineResolve(p, wd)
		if err != nil {
			var nc *sandbox.NotConfinedError
			var inv *sandbox.InvalidArgumentError
			if !(errors.As(err, &nc) || errors.As(err, &inv)) || !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("ConfineResolve(%q, %q) failed with %T, want *sandbox.NotConfinedError or a grammar refusal", p, wd, err)
			}
			if want, ok := resolveBySegments(p, wd); ok {
				t.Fatalf("ConfineResolve(%q, %q) refused a path the oracle confines to %q: %v", p, wd, want, err)
			}
			return
		}
		base := paths.Normalize(wd)
		if r != base && !strings.HasPrefix(r, strings.TrimSuffix(base, "/")+"/") {
			t.Fatalf("ConfineResolve(%q, %q) = %q, outside %q", p, wd, r, base)
		}
		if !strings.HasPrefix(r, "/") || paths.Normalize(r) != r {
			t.Fatalf("ConfineResolve(%q, %q) = %q, not absolute and normalised", p, wd, r)
		}
		if strings.ContainsRune(r, '\\') {
			t.Fatalf("ConfineResolve(%q, %q) = %q, holds a backslash", p, wd, r)
		}
		if slices.Contains(strings.Split(r, "/"), "..") {
			t.Fatalf("ConfineResolve(%q, %q) = %q, holds a .. segment", p, wd, r)
		}
		if want, ok := resolveBySegments(p, wd); !ok || want != r {
			t.Fatalf("ConfineResolve(%q, %q) = %q; the oracle says %q (confined %v)", p, wd, r, want, ok)
		}
	})
}

// resolveBySegments is an oracle written without package path: it resolves p against an
// absolute wd on a stack of segments and reports whether the result keeps wd's segments as
// its prefix and passes the grammar (no NUL byte, nothing too long for Linux).
func resolveBySegments(p, wd string) (string, bool) {
	if strings.ContainsRune(p, '\\') || strings.ContainsRune(wd, '\\') || !strings.HasPrefix(wd, "/") || strings.ContainsRune(p+wd, 0) {
		return "", false
	}
	push := func(stack []string, s string) []string {
		for seg := range strings.SplitSeq(s, "/") {
			switch seg {
			case "", ".":
			case "..":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			default:
				stack = append(stack, seg)
			}
		}
		return stack
	}
	base := push(nil, wd)
	var stack []string
	if !strings.HasPrefix(p, "/") {
		stack = slices.Clone(base)
	}
	stack = push(stack, p)
	if len(stack) < len(base) || !slices.Equal(stack[:len(base)], base) {
		return "", false
	}
	r := "/" + strings.Join(stack, "/")
	return r, paths.CheckGrammar(r) == nil
}
