package conformance

import (
	"bytes"
	"context"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// AssertStorageBaseConformance checks the storage base of protocol §7 on a freshly acquired
// sandbox, whose subject's working directory is the base the caller expects: the explicit
// Spec.WorkDir it acquired with, or the backend's documented default. Nothing is planted
// first, so the first probes see the base exactly as acquire left it: it must already exist.
// The probes then address everything relatively, "." naming the base and a relative working
// directory resolving beneath it, and check that exec, writes, reads, removals and reclaims
// meet at the same place as the absolute spelling.
//
// Each probe runs when the capabilities it exercises are declared. The suite itself is owed
// by any backend declaring exec or a files capability (runtime-only workloads need no base);
// a subject declaring none of them fails with [*sandbox.InvalidArgumentError]. A
// [*sandbox.ConformanceFailure] reports failed probes. The results are returned whenever the
// probes ran.
//
// What one sandbox cannot show is left to the caller, and §14.6 asks for it: a fresh
// default and a fresh explicit base, a warm acquire that keeps the base and its contents, a
// base the guest removed that the next acquire restores, and a warm acquire asking for a
// different base, which must be refused.
func AssertStorageBaseConformance(ctx context.Context, s Subject) ([]Result, error) {
	return storageBaseSuite.assert(ctx, s)
}

var storageBaseSuite = suite{
	name:  "STORAGE_BASE",
	anyOf: []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesList, sandbox.FilesDelete},
	plant: layoutOnly,
	probes: []probe{
		{name: "the-base-is-a-directory", needs: []sandbox.Capability{sandbox.FilesOut}, run: probeTheBaseIsADirectory,
			why: "acquire owes the base before it returns; a caller that has to create it first has nowhere confined to create it from"},
		{name: "dot-is-the-base", needs: []sandbox.Capability{sandbox.Exec}, run: probeDotIsTheBase,
			why: "kinds address everything relative to the base, \".\" naming it; an exec that runs elsewhere reads and writes where nobody can predict"},
		{name: "a-relative-working-directory-lies-beneath-the-base", needs: []sandbox.Capability{sandbox.Exec}, run: probeARelativeWorkingDirectoryLiesBeneathTheBase,
			why: "a call's relative working directory is a child of the base, never of whatever directory the engine happens to start in"},
		{name: "a-relative-write-lands-in-the-base", needs: []sandbox.Capability{sandbox.FilesIn, sandbox.Exec}, run: probeARelativeWriteLandsInTheBase,
			why: "an input written relatively must be where the program, looking under the base, finds it"},
		{name: "relative-and-absolute-addresses-meet", needs: []sandbox.Capability{sandbox.FilesIn, sandbox.FilesOut}, run: probeRelativeAndAbsoluteAddressesMeet,
			why: "absolute addressing stays accepted for compatibility, and both spellings must name one file, with stat paths relative to the working directory given"},
		{name: "a-relative-removal-stays-in-the-base", needs: []sandbox.Capability{sandbox.FilesDelete}, run: probeARelativeRemovalStaysInTheBase,
			why: "a relative removal names a child of the base, and \".\" is the base itself, which is never removed"},
		{name: "a-relative-reclaim-names-a-child-of-the-base", needs: []sandbox.Capability{sandbox.Reclaim}, run: probeARelativeReclaimNamesAChildOfTheBase,
			why: "the framework reclaims a call's relative directory against \".\"; the base itself must be refused, or one cleanup takes every later call's ground"},
	},
}

func probeTheBaseIsADirectory(ctx context.Context, s Subject, l Layout) error {
	st, err := s.Sandbox().StatFile(ctx, ".", ".")
	if err != nil {
		return err
	}
	switch {
	case st == nil:
		return failf("the base %s does not exist after acquire", l.Work)
	case st.Kind != sandbox.EntryDirectory:
		return failf("the base %s stats as %q, not a directory", l.Work, st.Kind)
	case st.Path != "":
		return failf("the base stats against \".\" with path %q, not \"\"", st.Path)
	}
	abs, err := s.Sandbox().StatFile(ctx, l.Work, l.Work)
	if err != nil {
		return err
	}
	if abs == nil || abs.Kind != sandbox.EntryDirectory {
		return failf("\".\" stats as a directory but the expected base %s does not (%+v): the backend bound another base", l.Work, abs)
	}
	return nil
}

func probeDotIsTheBase(ctx context.Context, s Subject, l Layout) error {
	res, err := s.Sandbox().Exec(ctx, sandbox.Argv("pwd"), ".", PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("pwd against \".\" exited %d: %s (does the base exist?)", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	if got := strings.TrimSpace(res.StdoutText()); got != l.Work {
		return failf("pwd against \".\" answered %q, not the base %q", got, l.Work)
	}
	return nil
}

func probeARelativeWorkingDirectoryLiesBeneathTheBase(ctx context.Context, s Subject, l Layout) error {
	sb := s.Sandbox()
	if _, err := guestRun(ctx, sb, ".", "mkdir", "-p", "sb-relative/inner"); err != nil {
		return err
	}
	res, err := sb.Exec(ctx, sandbox.Argv("pwd"), "sb-relative/inner", PlantTimeout)
	if err != nil {
		return err
	}
	if got, want := strings.TrimSpace(res.StdoutText()), l.In("sb-relative/inner"); got != want {
		return failf("pwd against the relative working directory sb-relative/inner answered %q, not %q", got, want)
	}
	return nil
}

func probeARelativeWriteLandsInTheBase(ctx context.Context, s Subject, l Layout) error {
	content := []byte("written relatively\n")
	if err := s.Sandbox().WriteFile(ctx, "sb-write/note.txt", content, "."); err != nil {
		return err
	}
	got, err := guestCat(ctx, s.Sandbox(), l.In("sb-write/note.txt"), "/")
	if err != nil {
		return failf("a write of sb-write/note.txt against \".\" is not at %s: %v", l.In("sb-write/note.txt"), err)
	}
	if !bytes.Equal(got, content) {
		return failf("%s reads back in the guest as %q, not %q", l.In("sb-write/note.txt"), got, content)
	}
	return nil
}

func probeRelativeAndAbsoluteAddressesMeet(ctx context.Context, s Subject, l Layout) error {
	sb := s.Sandbox()
	relative, absolute := []byte("written relatively\n"), []byte("written absolutely\n")
	if err := sb.WriteFile(ctx, "sb-meet/relative.txt", relative, "."); err != nil {
		return err
	}
	if err := sb.WriteFile(ctx, l.In("sb-meet/absolute.txt"), absolute, l.Work); err != nil {
		return err
	}
	reads := []struct {
		p, wd string
		want  []byte
	}{
		{l.In("sb-meet/relative.txt"), l.Work, relative},
		{"sb-meet/absolute.txt", ".", absolute},
		{"relative.txt", "sb-meet", relative},
	}
	for _, r := range reads {
		got, err := sb.ReadFile(ctx, r.p, r.wd, ReadCap)
		if err != nil {
			return failf("reading %s against %q: %v", r.p, r.wd, err)
		}
		if !bytes.Equal(got, r.want) {
			return failf("reading %s against %q gave %q, not %q", r.p, r.wd, got, r.want)
		}
	}
	st, err := sb.StatFile(ctx, "sb-meet/relative.txt", ".")
	if err != nil {
		return err
	}
	if st == nil || st.Path != "sb-meet/relative.txt" {
		return failf("stat of sb-meet/relative.txt against \".\" = %+v, want that path relative to the base", st)
	}
	return nil
}

func probeARelativeRemovalStaysInTheBase(ctx context.Context, s Subject, l Layout) error {
	for _, rel := range []string{"sb-remove.txt", "sb-keep.txt"} {
		if err := s.PlantFile(ctx, l.In(rel), []byte(rel)); err != nil {
			return err
		}
	}
	if err := s.Sandbox().Remove(ctx, "sb-remove.txt", ".", false); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("sb-remove.txt"), "a relative removal against \".\" left its file"); f != nil {
		return f
	}
	if f := present(ctx, s, l.In("sb-keep.txt"), "a file beside a relative removal"); f != nil {
		return f
	}
	err := s.Sandbox().Remove(ctx, ".", ".", true)
	if f := refusedWith(confinement, "removing \".\" against \".\"", err); f != nil {
		return f
	}
	return present(ctx, s, l.In("sb-keep.txt"), "the base's content after a refused removal of \".\"")
}

func probeARelativeReclaimNamesAChildOfTheBase(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("sb-call/note.txt"), []byte("a call's own file\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("sb-beside-call.txt"), []byte("not the call's\n")); err != nil {
		return err
	}
	if err := s.Sandbox().Reclaim(ctx, "sb-call", ".", reclaimTimeout); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("sb-call"), "a relative reclaim against \".\" left its directory"); f != nil {
		return f
	}
	err := s.Sandbox().Reclaim(ctx, ".", ".", reclaimTimeout)
	if f := refusedWith(confinement, "reclaiming \".\" against \".\"", err); f != nil {
		return f
	}
	return present(ctx, s, l.In("sb-beside-call.txt"), "the base's content after a refused reclaim of \".\"")
}
