package paths

import (
	"context"
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// The per-method policies of protocol §6.3. Each takes the call's path p and an absolute
// working directory wd (resolve a relative one with [ResolveWorkDir] first) and returns the
// normalised absolute path the method then operates on. Confinement refusals are
// [*sandbox.NotConfinedError]; a non-directory ancestor is [*sandbox.NotDirectoryError];
// errors from stat are returned wrapped.

// ResolveWrite is WriteFile's policy: the string check, then refuse the working directory
// itself, walk the ancestors (not the target), and finally refuse a target that is a link,
// since writing would follow it. What the caller creates below the first missing component is
// a fresh directory, never a link. A path spelled as a directory (a trailing "/", a last
// element "." or "..") is refused first with [*sandbox.InvalidArgumentError]: a write makes a
// regular file.
func ResolveWrite(ctx context.Context, stat StatFunc, p, wd string) (string, error) {
	r, err := CheckWrite(p, wd)
	if err != nil {
		return "", err
	}
	if err := RefuseSymlinkedAncestors(ctx, stat, r, wd, false); err != nil {
		return "", err
	}
	e, err := stat(ctx, r)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", r, err)
	}
	if e != nil && e.Kind == sandbox.EntrySymlink {
		return "", notConfined(p, wd, "the path is a link, and writing would follow it")
	}
	return r, nil
}

// CheckWrite is the string part of [ResolveWrite], which a backend runs before any engine call
// or freeze: the grammar, the confinement, the working directory itself, and a path spelled as
// a directory.
func CheckWrite(p, wd string) (string, error) {
	r, err := resolveBelow(p, wd, "written")
	if err != nil {
		return "", err
	}
	if err := checkFileName(p, "written"); err != nil {
		return "", err
	}
	return r, nil
}

// ResolveRead is the policy of StatFile and ReadFile: the string check, then the walk
// excluding the target. The target itself is left to the method, which describes it without
// following it.
func ResolveRead(ctx context.Context, stat StatFunc, p, wd string) (string, error) {
	r, err := ConfineResolve(p, wd)
	if err != nil {
		return "", err
	}
	if err := RefuseSymlinkedAncestors(ctx, stat, r, wd, false); err != nil {
		return "", err
	}
	return r, nil
}

// ResolveList is ListDir's policy: the string check, then the walk including the target,
// because listing a link would traverse it exactly as reading through it would.
func ResolveList(ctx context.Context, stat StatFunc, p, wd string) (string, error) {
	r, err := ConfineResolve(p, wd)
	if err != nil {
		return "", err
	}
	if err := RefuseSymlinkedAncestors(ctx, stat, r, wd, true); err != nil {
		return "", err
	}
	return r, nil
}

// ResolveRemove is Remove's policy: the string check, then refuse the working directory
// itself, then walk the ancestors. The target is never resolved: a link there is the thing
// being removed.
func ResolveRemove(ctx context.Context, stat StatFunc, p, wd string) (string, error) {
	r, err := resolveBelow(p, wd, "removed")
	if err != nil {
		return "", err
	}
	if err := RefuseSymlinkedAncestors(ctx, stat, r, wd, false); err != nil {
		return "", err
	}
	return r, nil
}

// ResolveReclaim is the string check Reclaim owes (protocol §4.9): dir, resolved against wd,
// must lie strictly below wd and have at least two components from "/", because the removal
// runs from "/". Escapes and backslashes fail as in [ConfineResolve]; naming wd itself or a
// path that close to the root fails with [*sandbox.InvalidArgumentError]. No walk is made:
// the removal unlinks a link operand rather than resolving it.
func ResolveReclaim(dir, wd string) (string, error) {
	r, err := ConfineResolve(dir, wd)
	if err != nil {
		return "", err
	}
	if r == Normalize(wd) {
		return "", &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"reclaim must name a child of the working directory %q, not the working directory itself", wd)}
	}
	if strings.Count(r, "/") < 2 {
		return "", &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"refusing to reclaim %q recursively: it is that close to the root", r)}
	}
	return r, nil
}

// resolveBelow is ConfineResolve plus the refusal of the working directory itself.
func resolveBelow(p, wd, verb string) (string, error) {
	r, err := ConfineResolve(p, wd)
	if err != nil {
		return "", err
	}
	if r == Normalize(wd) {
		return "", notConfined(p, wd, "the path names the working directory itself, which cannot be "+verb)
	}
	return r, nil
}
