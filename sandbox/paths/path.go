package paths

import (
	"path"
	"strings"
)

// Normalize collapses repeated slashes and "." segments and resolves ".." lexically, never
// climbing above "/". The empty string normalises to ".". Normalize is idempotent.
func Normalize(p string) string { return path.Clean(p) }

// Join joins p onto base with POSIX semantics and normalises the result: an absolute p
// replaces base entirely (path.Join("/w", "/etc/x") would give "/w/etc/x", which is wrong
// for guest paths), and an empty p names base.
func Join(base, p string) string {
	if base == "" || strings.HasPrefix(p, "/") {
		return Normalize(p)
	}
	return Normalize(base + "/" + p)
}

// RelativeTo returns p relative to base, both normalised first, and whether p is base or
// lies below it. p equal to base yields "". Containment compares against base + "/" (base
// itself when it already ends in "/"), so a sibling sharing a string prefix ("/w-outside"
// against "/w") is not inside.
func RelativeTo(p, base string) (string, bool) {
	p, base = Normalize(p), Normalize(base)
	if p == base {
		return "", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if rel, ok := strings.CutPrefix(p, prefix); ok {
		return rel, true
	}
	return "", false
}

// ConfineResolve resolves p against the working directory wd and returns the normalised
// absolute result, which is wd itself or lies below it. "." (and "") name wd; an absolute p
// inside wd is accepted.
//
// It fails with [*sandbox.NotConfinedError] when p or wd contains a backslash (which is not a
// separator), when wd is not absolute (resolve a relative one with [ResolveWorkDir] first),
// and when the result resolves outside wd; with [*sandbox.InvalidArgumentError] when p, wd or
// the result breaks the grammar of [CheckGrammar] (a NUL byte, a component or a path too long
// for Linux). It is a string check only: links are the business of [RefuseSymlinkedAncestors].
func ConfineResolve(p, wd string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", CheckGrammar(p)
	}
	if strings.IndexByte(wd, 0) >= 0 {
		return "", CheckGrammar(wd)
	}
	if strings.ContainsRune(p, '\\') {
		return "", notConfined(p, wd, "the path contains a backslash, which is not a separator")
	}
	if strings.ContainsRune(wd, '\\') {
		return "", notConfined(p, wd, "the working directory contains a backslash, which is not a separator")
	}
	base := Normalize(wd)
	if !path.IsAbs(base) {
		return "", notConfined(p, wd, "the working directory is not absolute; resolve it against the storage base first")
	}
	r := Join(base, p)
	if _, ok := RelativeTo(r, base); !ok {
		return "", notConfined(p, wd, "resolves outside working directory")
	}
	if err := CheckGrammar(r); err != nil {
		return "", err
	}
	return r, nil
}

// ResolveWorkDir resolves a call's working directory against the storage base (protocol
// §4.3, §7): a relative wd resolves beneath base, "." (and "") naming base itself; an
// absolute wd is still accepted as given. The result is normalised. It is lexical only and
// refuses nothing: confinement is checked against the result by [ConfineResolve].
func ResolveWorkDir(base, wd string) string { return Join(Normalize(base), wd) }
