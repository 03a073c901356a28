package conformance

import (
	"context"
	"fmt"
	"path"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// The hostile layout of protocol §14.1. Paths named "…File" or "…Dir" are relative to the
// working directory, except [SecretFile] and [LeafFile], which are relative to the sibling
// outside it.
const (
	// ReadCap is what the read probes allow. It is large enough that nothing they read is
	// refused for its size: every refusal they assert is a confinement refusal, and a cap
	// breach would hide one.
	ReadCap int64 = 1 << 20
	// OutsideSuffix makes the outside directory a sibling of the working directory that
	// shares its string prefix (/maf-sandbox/work-outside against /maf-sandbox/work), so a
	// containment check comparing prefixes without the separator fails here.
	OutsideSuffix = "-outside"

	// SecretContent is planted outside the working directory; no probe may ever get it back.
	SecretContent = "the guest must not reach this\n"
	// InsideContent is the legitimate output every refusal is measured against.
	InsideContent = "a legitimate output\n"
	// PlainContent fills the regular file planted where a directory is expected.
	PlainContent = "not a directory\n"

	// InsideFile is a legitimate nested file: the positive control.
	InsideFile = "real/inside.txt"
	// PlainFile is a regular file standing where a probe expects a directory.
	PlainFile = "plain.txt"
	// LinkDir is a link to the outside directory: the escape as a parent component.
	LinkDir = "link-dir"
	// LinkFile is a link to the secret: the escape as the final component.
	LinkFile = "link-file"
	// SecretFile is the secret, relative to the outside directory.
	SecretFile = "secret.txt"
	// LeafFile is the secret one level deeper, relative to the outside directory: what a
	// listing through a link would enumerate.
	LeafFile = "sub/leaf.txt"
)

// Layout is where the hostile layout lies for one working directory. Work is the normalised
// working directory and Outside its sibling; every other path derives from them.
type Layout struct {
	Work    string
	Outside string
}

// NewLayout derives the layout from an absolute working directory. It fails with
// [*sandbox.InvalidArgumentError] for a relative working directory and for "/", which has no
// sibling outside it.
func NewLayout(wd string) (Layout, error) {
	work := paths.Normalize(wd)
	if !path.IsAbs(work) {
		return Layout{}, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"conformance: the working directory %q is not absolute", wd)}
	}
	if work == "/" {
		return Layout{}, &sandbox.InvalidArgumentError{Reason: `conformance: the working directory "/" has no sibling outside it to attack`}
	}
	return Layout{Work: work, Outside: work + OutsideSuffix}, nil
}

// In is rel under the working directory, as an absolute path.
func (l Layout) In(rel string) string { return paths.Join(l.Work, rel) }

// Out is rel under the outside directory, as an absolute path.
func (l Layout) Out(rel string) string { return paths.Join(l.Outside, rel) }

// Beyond is rel under the outside directory spelled relative to the working directory, the
// way a probe attacks it: "../work-outside/rel" for a working directory named work.
func (l Layout) Beyond(rel string) string {
	return "../" + path.Base(l.Outside) + "/" + rel
}

// LinkedDir is the absolute path of [LinkDir], the link to the outside directory.
func (l Layout) LinkedDir() string { return l.In(LinkDir) }

// UnderLinkedDir is a working directory one level inside [LinkDir]: the /maf-sandbox -> /
// case, where the link is an ancestor of the working directory rather than the directory
// itself.
func (l Layout) UnderLinkedDir() string { return l.In(LinkDir + "/sub") }

// PlantLayout plants the FILES_OUT layout through s: the inside, plain, secret and nested
// secret files, then [LinkDir] to the outside directory and [LinkFile] to the secret. It is
// exported so that a backend's own premise test can attack the same layout with its
// unconfined stat.
func PlantLayout(ctx context.Context, s Subject) (Layout, error) {
	l, err := NewLayout(s.WorkingDirectory())
	if err != nil {
		return Layout{}, err
	}
	files := []struct {
		abs     string
		content string
	}{
		{l.In(InsideFile), InsideContent},
		{l.In(PlainFile), PlainContent},
		{l.Out(SecretFile), SecretContent},
		{l.Out(LeafFile), SecretContent},
	}
	for _, f := range files {
		if err := s.PlantFile(ctx, f.abs, []byte(f.content)); err != nil {
			return Layout{}, fmt.Errorf("plant %s: %w", f.abs, err)
		}
	}
	links := []struct{ abs, target string }{
		{l.LinkedDir(), l.Outside},
		{l.In(LinkFile), l.Out(SecretFile)},
	}
	for _, k := range links {
		if err := s.PlantSymlink(ctx, k.abs, k.target); err != nil {
			return Layout{}, fmt.Errorf("plant %s -> %s: %w", k.abs, k.target, err)
		}
	}
	return l, nil
}
