package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestConformanceFilesInPassesOnTheFake(t *testing.T) {
	g := newGuest(t)
	results, err := AssertFilesInConformance(t.Context(), subjectOf(t, g, everything()))
	mustPass(t, results, err)
	if len(results) != 13 {
		t.Fatalf("%d results, want 13", len(results))
	}
	if b, _ := g.File(work + "/binary.bin"); string(b) != string(fidelityPayload) {
		t.Fatalf("binary.bin = %q", b)
	}
	if b, _ := g.File(work + "-outside/target.txt"); string(b) != "known" {
		t.Fatalf("the linked destination's target = %q", b)
	}
}

// ignoresBackslashes is a broken backend: a backslash is taken for a separator.
type ignoresBackslashes struct{ *guest }

func (b ignoresBackslashes) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	return b.guest.WriteFile(ctx, strings.ReplaceAll(p, `\`, "/"), content, wd)
}

// appendsWrites is a broken backend: a second write appends to the first.
type appendsWrites struct{ *guest }

func (b appendsWrites) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p)
	if old, ok := b.File(abs); ok {
		content = append(old, content...)
	}
	return b.guest.WriteFile(ctx, p, content, wd)
}

// followsLinkedDestinations is a broken backend: it writes wherever the path's links lead.
type followsLinkedDestinations struct{ *guest }

func (b followsLinkedDestinations) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	// The name check it keeps; the links it follows.
	wd = paths.ResolveWorkDir(b.StorageBase(), wd)
	abs, err := paths.ConfineResolve(p, wd)
	if err != nil {
		return err
	}
	if abs == wd {
		return &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: "the working directory itself"}
	}
	real := b.resolve(abs, false)
	return b.guest.WriteFile(ctx, real, content, paths.Join(real, ".."))
}

// translatesNewlines is a broken backend: its transport writes LF as CRLF.
type translatesNewlines struct{ *guest }

func (b translatesNewlines) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	return b.guest.WriteFile(ctx, p, []byte(strings.ReplaceAll(string(content), "\n", "\r\n")), wd)
}

// writesAsTheHost is a broken backend in front of a non-root guest: what its writes create
// belongs to the host, and the guest cannot change or remove it.
type writesAsTheHost struct{ *guest }

func (b writesAsTheHost) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	abs := paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p)
	var made []string
	for cur := abs; cur != "/"; cur = paths.Join(cur, "..") {
		if _, ok := b.Kind(cur); ok {
			break
		}
		made = append(made, cur)
	}
	if err := b.guest.WriteFile(ctx, p, content, wd); err != nil {
		return err
	}
	for _, m := range made {
		b.markHostOwned(m)
	}
	return nil
}

func TestConformanceFilesInCatchesBrokenBackends(t *testing.T) {
	cases := []struct {
		name string
		wrap func(*guest) sandbox.Sandbox
		want []string
	}{
		{"ignores backslashes", func(g *guest) sandbox.Sandbox { return ignoresBackslashes{g} }, sorted(
			"a-backslash-is-refused")},
		{"appends", func(g *guest) sandbox.Sandbox { return appendsWrites{g} }, sorted(
			"a-second-write-replaces")},
		{"follows links", func(g *guest) sandbox.Sandbox { return followsLinkedDestinations{g} }, sorted(
			"a-path-through-a-linked-parent-is-refused", "a-linked-destination-is-refused-not-followed",
			"a-linked-working-directory", "a-linked-ancestor-of-the-working-directory")},
		{"translates newlines", func(g *guest) sandbox.Sandbox { return translatesNewlines{g} }, sorted(
			"bytes-survive-the-round-trip")},
		{"writes as the host", func(g *guest) sandbox.Sandbox { g.nonRoot = true; return writesAsTheHost{g} }, sorted(
			"a-write-leaves-nothing-beyond-the-guest")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AssertFilesInConformance(t.Context(), subjectOf(t, tc.wrap(newGuest(t)), everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q\n%v", got, tc.want, err)
			}
		})
	}
}

func TestConformanceTheReachProbeIsVacuousForARootGuest(t *testing.T) {
	// The same host-authority writes, in front of a root guest: the two authorities are one,
	// so the probe has nothing to distinguish and passes.
	g := newGuest(t)
	results, err := AssertFilesInConformance(t.Context(), subjectOf(t, writesAsTheHost{g}, everything()))
	mustPass(t, results, err)
}
