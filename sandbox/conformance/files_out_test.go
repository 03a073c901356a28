package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestConformanceFilesOutPassesOnTheFake(t *testing.T) {
	g := newGuest(t)
	results, err := AssertFilesOutConformance(t.Context(), subjectOf(t, g, everything()))
	mustPass(t, results, err)
	if len(results) != 12 {
		t.Fatalf("%d results, want 12", len(results))
	}
	// The layout really landed, links and all, where the probes attacked it.
	for abs, want := range map[string]sandbox.EntryKind{
		work + "/real/inside.txt":      sandbox.EntryFile,
		work + "/plain.txt":            sandbox.EntryFile,
		work + "-outside/secret.txt":   sandbox.EntryFile,
		work + "-outside/sub/leaf.txt": sandbox.EntryFile,
		work + "/link-dir":             sandbox.EntrySymlink,
		work + "/link-file":            sandbox.EntrySymlink,
	} {
		if k, _ := g.Kind(abs); k != want {
			t.Errorf("%s is %q, want %q", abs, k, want)
		}
	}
	if target, _ := g.LinkTarget(work + "/link-file"); target != work+"-outside/secret.txt" {
		t.Errorf("link-file -> %s", target)
	}
}

// followsLinks is a broken backend: its pull surface resolves every link, the working
// directory's and the final component's included, before serving the path.
type followsLinks struct{ *guest }

func (b followsLinks) real(p, wd string) string {
	return b.resolve(paths.Join(paths.ResolveWorkDir(b.StorageBase(), wd), p), false)
}

func (b followsLinks) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	return b.guest.StatFile(ctx, b.real(p, wd), "/")
}

func (b followsLinks) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	return b.guest.ReadFile(ctx, b.real(p, wd), "/", maxBytes)
}

func (b followsLinks) ListDir(ctx context.Context, p, wd string) ([]sandbox.FileStat, error) {
	return b.guest.ListDir(ctx, b.real(p, wd), "/")
}

// checksFromTheWorkingDirectory is a broken backend: it resolves the working directory
// through its links and checks only from there down, so a linked working directory or
// ancestor goes unseen.
type checksFromTheWorkingDirectory struct{ *guest }

func (b checksFromTheWorkingDirectory) wd(wd string) string {
	return b.resolve(paths.ResolveWorkDir(b.StorageBase(), wd), false)
}

func (b checksFromTheWorkingDirectory) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	return b.guest.StatFile(ctx, p, b.wd(wd))
}

func (b checksFromTheWorkingDirectory) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	return b.guest.ReadFile(ctx, p, b.wd(wd), maxBytes)
}

func (b checksFromTheWorkingDirectory) ListDir(ctx context.Context, p, wd string) ([]sandbox.FileStat, error) {
	return b.guest.ListDir(ctx, p, b.wd(wd))
}

// callsENOTDIRAnEscape is a broken backend: a regular file where a directory was expected
// comes back as a confinement refusal.
type callsENOTDIRAnEscape struct{ *guest }

func (b callsENOTDIRAnEscape) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	st, err := b.guest.StatFile(ctx, p, wd)
	var nd *sandbox.NotDirectoryError
	if errors.As(err, &nd) {
		return nil, &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: "not a directory"}
	}
	return st, err
}

// hidesLinks is a broken backend: its listing leaves links out.
type hidesLinks struct{ *guest }

func (b hidesLinks) ListDir(ctx context.Context, p, wd string) ([]sandbox.FileStat, error) {
	entries, err := b.guest.ListDir(ctx, p, wd)
	return slices.DeleteFunc(entries, func(e sandbox.FileStat) bool { return e.Kind == sandbox.EntrySymlink }), err
}

func TestConformanceFilesOutCatchesBrokenBackends(t *testing.T) {
	cases := []struct {
		name string
		wrap func(*guest) sandbox.Sandbox
		want []string
	}{
		{"follows links", func(g *guest) sandbox.Sandbox { return followsLinks{g} }, sorted(
			"a-link-is-named-a-link", "a-link-is-never-read", "stat-through-a-linked-parent",
			"read-through-a-linked-parent", "a-linked-working-directory", "a-linked-ancestor-of-the-working-directory",
			"listing-a-linked-directory", "listing-through-a-linked-parent", "listing-under-a-linked-ancestor",
			"a-listing-names-its-links")},
		{"checks from the working directory", func(g *guest) sandbox.Sandbox { return checksFromTheWorkingDirectory{g} }, sorted(
			"a-linked-working-directory", "a-linked-ancestor-of-the-working-directory", "listing-under-a-linked-ancestor")},
		{"calls ENOTDIR an escape", func(g *guest) sandbox.Sandbox { return callsENOTDIRAnEscape{g} }, sorted(
			"a-plain-parent-is-not-an-escape")},
		{"hides links", func(g *guest) sandbox.Sandbox { return hidesLinks{g} }, sorted(
			"a-listing-names-its-links")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			results, err := AssertFilesOutConformance(t.Context(), subjectOf(t, tc.wrap(newGuest(t)), everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q", got, tc.want)
			}
			if len(results) != 12 {
				t.Fatalf("%d results, want all 12 alongside the failure", len(results))
			}
		})
	}
}
