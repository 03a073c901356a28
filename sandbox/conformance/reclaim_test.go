package conformance

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestConformanceReclaimPassesOnTheFake(t *testing.T) {
	g := newGuest(t)
	results, err := AssertReclaimConformance(t.Context(), subjectOf(t, g, everything()))
	mustPass(t, results, err)
	if len(results) != 5 {
		t.Fatalf("%d results, want 5", len(results))
	}
	if _, ok := g.Kind(work + "-outside/reclaim-target.txt"); !ok {
		t.Fatalf("the target of the link inside the reclaimed directory is gone")
	}
	if len(g.ReclaimCalls()) != 6 {
		t.Fatalf("%d reclaims, want 6", len(g.ReclaimCalls()))
	}
}

// reclaimsNothing is a broken backend: Reclaim succeeds and removes nothing.
type reclaimsNothing struct{ *guest }

func (reclaimsNothing) Reclaim(context.Context, string, string, time.Duration) error { return nil }

// reclaimInsistsOnPresence is a broken backend: reclaiming what is not there fails.
type reclaimInsistsOnPresence struct{ *guest }

func (b reclaimInsistsOnPresence) Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), dir)
	if _, ok := b.Kind(abs); !ok {
		return &sandbox.PathError{Op: "reclaim", Path: dir, Err: fs.ErrNotExist}
	}
	return b.guest.Reclaim(ctx, dir, wd, timeout)
}

// reclaimFollowsLinks is a broken backend: links inside the directory take their targets.
type reclaimFollowsLinks struct{ *guest }

func (b reclaimFollowsLinks) Reclaim(ctx context.Context, dir, wd string, timeout time.Duration) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), dir)
	for _, q := range b.Paths() {
		if target, ok := b.LinkTarget(q); ok && strings.HasPrefix(q, abs+"/") {
			_ = b.guest.Remove(ctx, target, "/", true)
		}
	}
	return b.guest.Reclaim(ctx, dir, wd, timeout)
}

func TestConformanceReclaimCatchesBrokenBackends(t *testing.T) {
	cases := []struct {
		name string
		wrap func(*guest) sandbox.Sandbox
		want []string
	}{
		{"reclaims nothing", func(g *guest) sandbox.Sandbox { return reclaimsNothing{g} }, sorted(
			"a-created-directory-is-gone", "nested-content-goes-with-it", "a-link-inside-is-unlinked-not-followed",
			"a-missing-directory-is-success")},
		{"insists on presence", func(g *guest) sandbox.Sandbox { return reclaimInsistsOnPresence{g} }, sorted(
			"a-missing-directory-is-success", "an-absent-working-directory-still-succeeds")},
		{"follows links", func(g *guest) sandbox.Sandbox { return reclaimFollowsLinks{g} }, sorted(
			"a-link-inside-is-unlinked-not-followed")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AssertReclaimConformance(t.Context(), subjectOf(t, tc.wrap(newGuest(t)), everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q\n%v", got, tc.want, err)
			}
		})
	}
}

// observedSubject sees through its own observer rather than through Exec.
type observedSubject struct {
	*PosixGuestSubject
	g    *guest
	asks int
}

func (o *observedSubject) Exists(_ context.Context, abs string) (bool, error) {
	o.asks++
	return o.g.exists(abs, true) || o.g.exists(abs, false), nil
}

func TestConformanceReclaimSeesThroughTheSubjectsObserver(t *testing.T) {
	g := newGuest(t)
	o := &observedSubject{PosixGuestSubject: subjectOf(t, g, everything()), g: g}
	results, err := AssertReclaimConformance(t.Context(), o)
	mustPass(t, results, err)
	if o.asks == 0 {
		t.Fatal("the suite never asked the subject's observer")
	}
	for _, c := range g.ExecCalls() {
		if strings.Contains(c.Text, existsScript) {
			t.Fatalf("the suite asked the guest although the subject observes: %s", c.Text)
		}
	}
}
