package paths

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// StatFunc describes the guest entry at the absolute path abs without following it, or
// returns (nil, nil) when the engine says nothing is there. It must be unconfined (it sees
// the working directory's own ancestors), no-follow (a link is reported as
// [sandbox.EntrySymlink]) and, wherever the engine offers anything else, not answered by the
// guest. A failure to find out is an error, never a nil entry.
type StatFunc func(ctx context.Context, abs string) (*sandbox.FileStat, error)

// Ancestors lists the components the ancestor walk visits for target under wd, outermost
// first, starting above wd (protocol §6.3): every prefix of the normalised wd from "/x"
// down, then one entry per segment of target relative to wd. "/" itself is never listed.
//
// For a target outside wd, such as the parent of wd when the target is wd itself, it lists
// every prefix of the normalised target instead, which is what a walk down to it must visit.
func Ancestors(target, wd string) []string {
	base, t := Normalize(wd), Normalize(target)
	rel, ok := RelativeTo(t, base)
	if !ok {
		return Prefixes(t)
	}
	out := Prefixes(base)
	if rel == "" {
		return out
	}
	cur := base
	for seg := range strings.SplitSeq(rel, "/") {
		cur = Join(cur, seg)
		out = append(out, cur)
	}
	return out
}

// Prefixes lists "/a", "/a/b", … for "/a/b", normalised first; nothing for "/" or ".". For a
// target at or below wd it is exactly what [Ancestors] visits, which is why a caller that
// prefetches the stats of a walk asks it for the list.
func Prefixes(p string) []string {
	p = Normalize(p)
	if p == "/" || p == "." {
		return nil
	}
	var out []string
	cur := ""
	if !strings.HasPrefix(p, "/") {
		first, rest, _ := strings.Cut(p, "/")
		cur, p = first, "/"+rest
		out = append(out, cur)
		if rest == "" {
			return out
		}
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		cur += "/" + seg
		out = append(out, cur)
	}
	return out
}

// RefuseSymlinkedAncestors walks from the first component below "/" down to target (to its
// parent unless includeSelf) and stats each component with stat, outermost first:
//
//   - nothing there: the walk stops and succeeds, since nothing below a missing component is
//     reachable;
//   - a link: [*sandbox.NotConfinedError], because a path through a link does not stay
//     inside wd;
//   - anything else that is not a directory: [*sandbox.NotDirectoryError] naming the
//     component, an ordinary ENOTDIR (the guest tripped over its own file, it did not
//     escape).
//
// An error from stat, or a cancelled ctx, is returned wrapped with the component.
func RefuseSymlinkedAncestors(ctx context.Context, stat StatFunc, target, wd string, includeSelf bool) error {
	deepest := Normalize(target)
	if !includeSelf {
		deepest = path.Dir(deepest)
	}
	for _, d := range Ancestors(deepest, wd) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("walk %s: %w", d, err)
		}
		e, err := stat(ctx, d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		switch {
		case e == nil:
			return nil
		case e.Kind == sandbox.EntrySymlink:
			return notConfined(target, wd, fmt.Sprintf(
				"%s is a link, not a real directory, so a path through it does not stay inside the working directory", d))
		case e.Kind != sandbox.EntryDirectory:
			return &sandbox.NotDirectoryError{Path: d}
		}
	}
	return nil
}
