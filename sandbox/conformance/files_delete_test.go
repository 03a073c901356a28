package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestConformanceFilesDeletePassesOnTheFake(t *testing.T) {
	g := newGuest(t)
	results, err := AssertFilesDeleteConformance(t.Context(), subjectOf(t, g, everything()))
	mustPass(t, results, err)
	if len(results) != 10 {
		t.Fatalf("%d results, want 10", len(results))
	}
	// What the probes said survived did survive, and what went is gone.
	for _, abs := range []string{work + "/bystander.txt", work + "/next-to-tree.txt", work + "/ground.txt",
		work + "-outside/target.txt", work + "-outside/interior-target.txt"} {
		if _, ok := g.Kind(abs); !ok {
			t.Errorf("%s is gone", abs)
		}
	}
	for _, abs := range []string{work + "/doomed.txt", work + "/tree", work + "/linked-tree", work + "/empty"} {
		if _, ok := g.Kind(abs); ok {
			t.Errorf("%s is still there", abs)
		}
	}
}

// followsLinksOnRemove is a broken backend: a link named by the removal, or met inside a
// recursively removed tree, takes its target with it.
type followsLinksOnRemove struct{ *guest }

func (b followsLinksOnRemove) Remove(ctx context.Context, p, wd string, recursive bool) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p)
	victims := []string{abs}
	if recursive {
		for _, q := range b.Paths() {
			if strings.HasPrefix(q, abs+"/") {
				victims = append(victims, q)
			}
		}
	}
	for _, v := range victims {
		if target, ok := b.LinkTarget(v); ok {
			_ = b.guest.Remove(ctx, target, "/", true)
		}
	}
	return b.guest.Remove(ctx, p, wd, recursive)
}

// carvesOutEmpty is a broken backend: an empty directory goes without recursive.
type carvesOutEmpty struct{ *guest }

func (b carvesOutEmpty) Remove(ctx context.Context, p, wd string, recursive bool) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p)
	if k, _ := b.Kind(abs); k == sandbox.EntryDirectory && !recursive {
		for _, q := range b.Paths() {
			if strings.HasPrefix(q, abs+"/") {
				return b.guest.Remove(ctx, p, wd, recursive)
			}
		}
		recursive = true
	}
	return b.guest.Remove(ctx, p, wd, recursive)
}

// damagesThenRefuses is a broken backend: it removes what it was asked, following links,
// and only then raises the refusal the protocol documents.
type damagesThenRefuses struct{ *guest }

func (b damagesThenRefuses) Remove(ctx context.Context, p, wd string, recursive bool) error {
	err := b.guest.Remove(ctx, p, wd, recursive)
	if err != nil {
		real := b.resolve(paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p), false)
		if real != paths.ResolveWorkDir(b.StorageBase(), wd) {
			_ = b.guest.Remove(ctx, real, "/", true)
		}
	}
	return err
}

// removesNothing is a broken backend: every removal succeeds and does nothing.
type removesNothing struct{ *guest }

func (removesNothing) Remove(context.Context, string, string, bool) error { return nil }

func TestConformanceFilesDeleteCatchesBrokenBackends(t *testing.T) {
	cases := []struct {
		name string
		wrap func(*guest) sandbox.Sandbox
		want []string
	}{
		{"follows links", func(g *guest) sandbox.Sandbox { return followsLinksOnRemove{g} }, sorted(
			"a-link-is-removed-never-followed", "a-link-inside-a-recursive-removal-is-unlinked-not-followed")},
		{"carves out empty directories", func(g *guest) sandbox.Sandbox { return carvesOutEmpty{g} }, sorted(
			"an-empty-directory-needs-recursive")},
		{"damages then refuses", func(g *guest) sandbox.Sandbox { return damagesThenRefuses{g} }, sorted(
			"a-path-through-a-linked-parent-is-refused", "a-path-outside-is-refused", "a-directory-needs-recursive",
			"an-empty-directory-needs-recursive")},
		{"removes nothing", func(g *guest) sandbox.Sandbox { return removesNothing{g} }, sorted(
			"a-removal-removes", "a-link-is-removed-never-followed", "a-path-through-a-linked-parent-is-refused",
			"a-directory-needs-recursive", "an-empty-directory-needs-recursive", "recursive-removes-the-tree",
			"a-link-inside-a-recursive-removal-is-unlinked-not-followed", "the-working-directory-is-refused",
			"a-path-outside-is-refused")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AssertFilesDeleteConformance(t.Context(), subjectOf(t, tc.wrap(newGuest(t)), everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q\n%v", got, tc.want, err)
			}
		})
	}
}
