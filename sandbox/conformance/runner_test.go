package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestConformanceProbeNamesFollowTheSpec(t *testing.T) {
	cases := []struct {
		name     string
		suite    suite
		requires sandbox.Capability
		want     []string
	}{
		{"FILES_OUT", filesOutSuite, sandbox.FilesOut, []string{
			"a-legitimate-read-still-works", "a-link-is-named-a-link", "a-link-is-never-read",
			"stat-through-a-linked-parent", "read-through-a-linked-parent", "a-linked-working-directory",
			"a-linked-ancestor-of-the-working-directory", "a-plain-parent-is-not-an-escape",
			"listing-a-linked-directory", "listing-through-a-linked-parent", "listing-under-a-linked-ancestor",
			"a-listing-names-its-links"}},
		{"FILES_IN", filesInSuite, sandbox.FilesIn, []string{
			"a-write-lands-and-reads-back", "bytes-survive-the-round-trip", "str-content-is-utf8",
			"a-second-write-replaces", "parents-are-created", "a-path-outside-is-refused",
			"a-path-through-a-linked-parent-is-refused", "a-linked-destination-is-refused-not-followed",
			"the-working-directory-is-refused", "a-backslash-is-refused", "a-linked-working-directory",
			"a-linked-ancestor-of-the-working-directory", "a-write-leaves-nothing-beyond-the-guest"}},
		{"EXEC", execSuite, sandbox.Exec, []string{
			"an-argv-sequence-runs", "exit-code-fidelity", "argv-is-quoted", "working-directory-is-honoured",
			"streams-stay-separate", "exec-byte-fidelity", "a-timeout-raises-timeout-error"}},
		{"FILES_DELETE", filesDeleteSuite, sandbox.FilesDelete, []string{
			"a-removal-removes", "a-missing-path-is-success", "a-link-is-removed-never-followed",
			"a-path-through-a-linked-parent-is-refused", "a-directory-needs-recursive",
			"an-empty-directory-needs-recursive", "recursive-removes-the-tree",
			"a-link-inside-a-recursive-removal-is-unlinked-not-followed", "the-working-directory-is-refused",
			"a-path-outside-is-refused"}},
		{"STORAGE_BASE", storageBaseSuite, "", []string{ // §14.6 names no probes; these are this package's
			"the-base-is-a-directory", "dot-is-the-base", "a-relative-working-directory-lies-beneath-the-base",
			"a-relative-write-lands-in-the-base", "relative-and-absolute-addresses-meet",
			"a-relative-removal-stays-in-the-base", "a-relative-reclaim-names-a-child-of-the-base"}},
		{"RECLAIM", reclaimSuite, sandbox.Reclaim, []string{
			"a-created-directory-is-gone", "nested-content-goes-with-it", "a-link-inside-is-unlinked-not-followed",
			"a-missing-directory-is-success", "an-absent-working-directory-still-succeeds"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.suite.name != tc.name || tc.suite.requires != tc.requires {
				t.Fatalf("suite = %s requiring %s, want %s requiring %s", tc.suite.name, tc.suite.requires, tc.name, tc.requires)
			}
			var got []string
			for _, p := range tc.suite.probes {
				got = append(got, p.name)
				if len(p.why) < 40 {
					t.Errorf("%s: its why is too thin to keep it from being deleted: %q", p.name, p.why)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("probes = %q\nwant     %q", got, tc.want)
			}
		})
	}
}

func TestConformanceTheTimeoutProbeRunsLast(t *testing.T) {
	last := execSuite.probes[len(execSuite.probes)-1]
	if last.name != "a-timeout-raises-timeout-error" {
		t.Fatalf("last EXEC probe = %s: a backend may discard the sandbox on timeout, so nothing may follow it", last.name)
	}
}

func TestConformanceAnUndeclaredRequirementIsRefusedBeforePlanting(t *testing.T) {
	cases := []struct {
		name     string
		assert   func(context.Context, Subject) ([]Result, error)
		requires sandbox.Capability
	}{
		{"FILES_OUT", AssertFilesOutConformance, sandbox.FilesOut},
		{"FILES_IN", AssertFilesInConformance, sandbox.FilesIn},
		{"EXEC", AssertExecConformance, sandbox.Exec},
		{"FILES_DELETE", AssertFilesDeleteConformance, sandbox.FilesDelete},
		{"RECLAIM", AssertReclaimConformance, sandbox.Reclaim},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuest(t)
			before := g.Paths()
			caps := everything().Minus(sandbox.NewCapabilitySet(tc.requires))
			results, err := tc.assert(t.Context(), subjectOf(t, g, caps))
			var invalid *sandbox.InvalidArgumentError
			if !errors.As(err, &invalid) || !strings.Contains(err.Error(), string(tc.requires)) {
				t.Fatalf("error = %v, want an invalid-argument error naming %s", err, tc.requires)
			}
			if results != nil {
				t.Errorf("results = %v, want none", results)
			}
			if after := g.Paths(); !slices.Equal(after, before) || len(g.ExecCalls()) != 0 {
				t.Fatalf("the refused run planted something: paths %q -> %q, %d execs", before, after, len(g.ExecCalls()))
			}
		})
	}
}

func TestConformanceAProbeNeedingAnUndeclaredCapabilityIsSkipped(t *testing.T) {
	g := newGuest(t)
	caps := everything().Minus(sandbox.NewCapabilitySet(sandbox.FilesList))
	results, err := AssertFilesOutConformance(t.Context(), subjectOf(t, g, caps))
	if err != nil {
		t.Fatalf("assert: %v", err)
	}
	var skipped []string
	for _, r := range results {
		switch {
		case r.Skipped:
			skipped = append(skipped, r.Name)
			if r.Reason != "backend does not declare files_list" || r.Passed {
				t.Errorf("%s: skipped with %q, passed=%t", r.Name, r.Reason, r.Passed)
			}
		case !r.Passed:
			t.Errorf("%s failed: %s", r.Name, r.Reason)
		}
	}
	want := []string{"listing-a-linked-directory", "listing-through-a-linked-parent", "listing-under-a-linked-ancestor", "a-listing-names-its-links"}
	if !slices.Equal(skipped, want) {
		t.Fatalf("skipped = %q, want %q", skipped, want)
	}
}

// statExplodes raises an unexpected error from StatFile and panics in ReadFile.
type statExplodes struct{ sandbox.Sandbox }

func (statExplodes) StatFile(context.Context, string, string) (*sandbox.FileStat, error) {
	return nil, &boom{what: "stat"}
}

func (statExplodes) ReadFile(context.Context, string, string, int64) ([]byte, error) {
	panic("read exploded")
}

func TestConformanceAnythingAProbeRaisesFailsThatProbeOnly(t *testing.T) {
	g := newGuest(t)
	results, err := AssertFilesOutConformance(t.Context(), subjectOf(t, statExplodes{g}, everything()))
	if len(results) != len(filesOutSuite.probes) {
		t.Fatalf("%d results for %d probes: every probe must run even after failures", len(results), len(filesOutSuite.probes))
	}
	by := map[string]Result{}
	for _, r := range results {
		by[r.Name] = r
	}
	if r := by["a-legitimate-read-still-works"]; r.Reason != "raised *conformance.boom: the provider fell over during stat" {
		t.Errorf("legitimate read reason = %q", r.Reason)
	}
	if r := by["a-link-is-never-read"]; r.Failed() == false || r.Reason != "panicked: read exploded" {
		t.Errorf("link read = %+v, want a failure naming the panic", r)
	}
	if r := by["stat-through-a-linked-parent"]; !strings.Contains(r.Reason, "failed with *conformance.boom") {
		t.Errorf("stat through a linked parent reason = %q, want the wrong family named", r.Reason)
	}
	for _, name := range []string{"listing-a-linked-directory", "a-listing-names-its-links"} {
		if !by[name].Passed {
			t.Errorf("%s touches neither stat nor read and must still pass: %q", name, by[name].Reason)
		}
	}
	var cf *sandbox.ConformanceFailure
	if !errors.As(err, &cf) || cf.Suite != "FILES_OUT" || cf.Total != 12 {
		t.Fatalf("error = %#v, want a FILES_OUT ConformanceFailure of 12", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "8 of 12 FILES_OUT conformance probes failed:") {
		t.Fatalf("message = %q", msg)
	}
	for _, f := range cf.Failures {
		if f.Why == "" || !strings.Contains(msg, f.Name) || !strings.Contains(msg, f.Why) {
			t.Errorf("the message does not name %s with its reason and why", f.Name)
		}
	}
}

func TestConformanceErrorTypeNamesTheTellingType(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"plain", errors.New("x"), "*errors.errorString"},
		{"typed", &sandbox.NotConfinedError{}, "*sandbox.NotConfinedError"},
		{"wrapped", fmt.Errorf("stat x: %w", &sandbox.NotDirectoryError{}), "*sandbox.NotDirectoryError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := errorType(tc.err); got != tc.want {
				t.Fatalf("errorType = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestConformanceRefusalsAcceptOnlyTheNamedFamily(t *testing.T) {
	cases := []struct {
		name   string
		f      family
		err    error
		accept bool
	}{
		{"confinement accepts NotConfined", confinement, &sandbox.NotConfinedError{}, true},
		{"confinement refuses ENOTDIR", confinement, &sandbox.NotDirectoryError{}, false},
		{"confinement refuses success", confinement, nil, false},
		{"not-a-directory accepts NotDirectory", notDirectory, &sandbox.NotDirectoryError{}, true},
		{"not-a-directory refuses NotConfined", notDirectory, &sandbox.NotConfinedError{}, false},
		{"OS accepts NotRegular", osLevel, &sandbox.NotRegularError{}, true},
		{"OS refuses NotConfined", osLevel, &sandbox.NotConfinedError{}, false},
		{"timeout accepts TimeoutError", timeout, &sandbox.TimeoutError{}, true},
		{"timeout refuses cancellation", timeout, context.Canceled, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := refusedWith(tc.f, "the call", tc.err)
			if (got == nil) != tc.accept {
				t.Fatalf("refusedWith = %v, want accepted=%t", got, tc.accept)
			}
			var f *failure
			if got != nil && !errors.As(got, &f) {
				t.Fatalf("a wrong refusal must be a check failure, got %T", got)
			}
		})
	}
}

func TestConformanceACancelledRunIsNoVerdict(t *testing.T) {
	g := newGuest(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	results, err := AssertFilesDeleteConformance(ctx, subjectOf(t, g, everything()))
	var cf *sandbox.ConformanceFailure
	if err == nil || errors.As(err, &cf) || !errors.Is(err, context.Canceled) || results != nil {
		t.Fatalf("results, err = %v, %v; want no results and the cancellation", results, err)
	}
}

func TestConformanceMeasureRunsEveryDeleteProbeWithoutRequirementOrVerdict(t *testing.T) {
	g := newGuest(t)
	caps := sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn) // files_delete undeclared
	results, err := MeasureFilesDeleteProbes(t.Context(), subjectOf(t, carvesOutEmpty{g}, caps))
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	if len(results) != len(filesDeleteSuite.probes) {
		t.Fatalf("%d results, want %d", len(results), len(filesDeleteSuite.probes))
	}
	for _, r := range results {
		if r.Skipped {
			t.Errorf("%s skipped: a measurement skips nothing", r.Name)
		}
		if want := r.Name != "an-empty-directory-needs-recursive"; r.Passed != want {
			t.Errorf("%s: passed=%t reason=%q", r.Name, r.Passed, r.Reason)
		}
	}
}
