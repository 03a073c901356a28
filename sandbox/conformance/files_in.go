package conformance

import (
	"bytes"
	"context"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// AssertFilesInConformance runs the FILES_IN probes of protocol §14.3: a write lands byte
// for byte, replaces, creates its parents, and refuses every path that leaves the working
// directory (by spelling, through a linked parent, at a linked destination, through a linked
// working directory or ancestor), the working directory itself and a backslash. It adds the
// reach probe, a-write-leaves-nothing-beyond-the-guest: what a write creates, the guest
// program can still change and remove. Each probe plants its own fixture and verifies
// through Exec (cat, test, sh, mkdir, rm).
//
// It fails with [*sandbox.InvalidArgumentError] when the subject does not declare files_in,
// and with a [*sandbox.ConformanceFailure] when any probe failed. The results are returned
// whenever the probes ran.
func AssertFilesInConformance(ctx context.Context, s Subject) ([]Result, error) {
	return filesInSuite.assert(ctx, s)
}

// fidelityPayload is UTF-8 text followed by every byte from 1 to 127: control bytes, CR and
// LF included, that a text-shaped hop in a transport would translate or truncate.
var fidelityPayload = func() []byte {
	b := []byte("ünïcödé→payload")
	for c := 1; c < 128; c++ {
		b = append(b, byte(c))
	}
	return b
}()

var filesInSuite = suite{
	name:     "FILES_IN",
	requires: sandbox.FilesIn,
	plant:    layoutOnly,
	probes: []probe{
		{name: "a-write-lands-and-reads-back", run: probeAWriteLandsAndReadsBack,
			why: "every other FILES_IN probe reads a file back, so a write that never landed would fail them all for the wrong reason; this one names the landing"},
		{name: "bytes-survive-the-round-trip", run: probeBytesSurviveTheRoundTrip,
			why: "FILES_IN carries bytes, and a text-shaped hop in the transport corrupts them in ways a caller cannot detect"},
		{name: "str-content-is-utf8", run: probeStrContentIsUTF8,
			why: "text goes in as UTF-8 whatever the host's locale says; a transport re-encoding it answers every non-ASCII write with mojibake"},
		{name: "a-second-write-replaces", run: probeASecondWriteReplaces,
			why: "a fix-loop writes the same path twice and the second content must be the whole file, neither appended nor laid over a longer first"},
		{name: "parents-are-created", run: probeParentsAreCreated,
			why: "a workload's path names directories nobody made, and the protocol gives kinds no other way to make them"},
		{name: "a-path-outside-is-refused", run: probeAWritePathOutsideIsRefused,
			why: "a write escaping its working directory would let a workload overwrite files beside it"},
		{name: "a-path-through-a-linked-parent-is-refused", run: probeAWriteThroughALinkedParentIsRefused,
			why: "a linked directory in the path redirects the write outside the working directory"},
		{name: "a-linked-destination-is-refused-not-followed", run: probeALinkedDestinationIsRefused,
			why: "following a link at the destination overwrites a file the guest chose, wherever it is"},
		{name: "the-working-directory-is-refused", run: probeTheWorkingDirectoryIsRefusedForWrite,
			why: "writing the working directory itself would replace the root every relative path is confined to"},
		{name: "a-backslash-is-refused", run: probeABackslashIsRefusedForWrite,
			why: "a backslash is not a separator in a guest path; accepting it makes the path grammar depend on the host"},
		{name: "a-linked-working-directory", run: probeALinkedWorkingDirectoryWrite,
			why: "a linked working directory redirects every relative write outside its declared root"},
		{name: "a-linked-ancestor-of-the-working-directory", run: probeALinkedAncestorWrite,
			why: "a linked ancestor redirects the working directory before any path below it is checked"},
		{name: "a-write-leaves-nothing-beyond-the-guest", run: probeAWriteLeavesNothingBeyondTheGuest,
			why: "the reach rule: a write must not leave a file or directory the guest program could not change or remove itself; inputs stay writable by the guest"},
	},
}

// layoutOnly derives the layout and plants nothing: each probe plants its own fixture, so a
// failed write is that probe's failure rather than the end of the run.
func layoutOnly(_ context.Context, s Subject) (Layout, error) {
	return NewLayout(s.WorkingDirectory())
}

// layoutWithMarker plants work/.probe-cwd, so the working directory exists even under a
// backend that does not create its storage base (the 0.21 caller-creates rule).
func layoutWithMarker(ctx context.Context, s Subject) (Layout, error) {
	l, err := NewLayout(s.WorkingDirectory())
	if err != nil {
		return Layout{}, err
	}
	if err := s.PlantFile(ctx, l.In(".probe-cwd"), nil); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// readsBack checks through the guest's cat that rel (from the working directory) holds want.
func readsBack(ctx context.Context, s Subject, rel string, want []byte) error {
	got, err := guestCat(ctx, s.Sandbox(), rel, s.WorkingDirectory())
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return failf("%s reads back in the guest as %q, not %q", rel, got, want)
	}
	return nil
}

// absent checks that nothing is at abs, which what names.
func absent(ctx context.Context, s Subject, abs, what string) error {
	there, err := exists(ctx, s, abs)
	if err != nil {
		return err
	}
	if there {
		return failf("%s: %s is there", what, abs)
	}
	return nil
}

// present checks that something is at abs, which what names.
func present(ctx context.Context, s Subject, abs, what string) error {
	there, err := exists(ctx, s, abs)
	if err != nil {
		return err
	}
	if !there {
		return failf("%s did not survive: %s is gone", what, abs)
	}
	return nil
}

func probeAWriteLandsAndReadsBack(ctx context.Context, s Subject, l Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	// Absolute, inside the working directory: accepted like its relative spelling.
	if err := sb.WriteFile(ctx, l.In("real/written.txt"), []byte("written"), wd); err != nil {
		return err
	}
	ok, err := guestTest(ctx, sb, "-f", "real/written.txt", wd)
	if err != nil {
		return err
	}
	if !ok {
		return failf("the written file is not a regular file at its guest path real/written.txt")
	}
	return readsBack(ctx, s, "real/written.txt", []byte("written"))
}

func probeBytesSurviveTheRoundTrip(ctx context.Context, s Subject, _ Layout) error {
	if err := s.Sandbox().WriteFile(ctx, "binary.bin", fidelityPayload, s.WorkingDirectory()); err != nil {
		return err
	}
	got, err := guestCat(ctx, s.Sandbox(), "binary.bin", s.WorkingDirectory())
	if err != nil {
		return err
	}
	if !bytes.Equal(got, fidelityPayload) {
		return failf("%d bytes went in and %d different ones came back (%q): a text-shaped hop in the transport translated or truncated them",
			len(fidelityPayload), len(got), got)
	}
	return nil
}

func probeStrContentIsUTF8(ctx context.Context, s Subject, _ Layout) error {
	if err := s.Sandbox().WriteFile(ctx, "text.txt", []byte("naïve"), s.WorkingDirectory()); err != nil {
		return err
	}
	return readsBack(ctx, s, "text.txt", []byte("naïve"))
}

func probeASecondWriteReplaces(ctx context.Context, s Subject, _ Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	if err := sb.WriteFile(ctx, "overwritten.txt", []byte("the first content, the longer one"), wd); err != nil {
		return err
	}
	if err := sb.WriteFile(ctx, "overwritten.txt", []byte("second"), wd); err != nil {
		return err
	}
	return readsBack(ctx, s, "overwritten.txt", []byte("second"))
}

func probeParentsAreCreated(ctx context.Context, s Subject, _ Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	if err := sb.WriteFile(ctx, "deep/er/est/leaf.txt", []byte("deep"), wd); err != nil {
		return err
	}
	ok, err := guestTest(ctx, sb, "-f", "deep/er/est/leaf.txt", wd)
	if err != nil {
		return err
	}
	if !ok {
		return failf("a write under parents nobody made did not land at deep/er/est/leaf.txt")
	}
	return nil
}

func probeAWritePathOutsideIsRefused(ctx context.Context, s Subject, l Layout) error {
	err := s.Sandbox().WriteFile(ctx, l.Beyond("planted.txt"), []byte("outside"), s.WorkingDirectory())
	if f := refusedWith(confinement, "writing "+l.Beyond("planted.txt"), err); f != nil {
		return f
	}
	return absent(ctx, s, l.Out("planted.txt"), "a refused write outside the working directory created its file")
}

func probeAWriteThroughALinkedParentIsRefused(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.Out("marker.txt"), []byte("marker")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.LinkedDir(), l.Outside); err != nil {
		return err
	}
	err := s.Sandbox().WriteFile(ctx, LinkDir+"/landed-through-parent.txt", []byte("landed"), s.WorkingDirectory())
	if f := refusedWith(confinement, "writing through the linked parent "+LinkDir, err); f != nil {
		return f
	}
	return absent(ctx, s, l.Out("landed-through-parent.txt"), "a refused write through a linked parent landed outside")
}

func probeALinkedDestinationIsRefused(ctx context.Context, s Subject, l Layout) error {
	target := l.Out("target.txt")
	if err := s.PlantFile(ctx, target, []byte("known")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.In(LinkFile), target); err != nil {
		return err
	}
	err := s.Sandbox().WriteFile(ctx, LinkFile, []byte("changed"), s.WorkingDirectory())
	if f := refusedWith(confinement, "writing to the linked destination "+LinkFile, err); f != nil {
		return f
	}
	got, err := guestCat(ctx, s.Sandbox(), target, "/")
	if err != nil {
		return err
	}
	if !bytes.Equal(got, []byte("known")) {
		return failf("a refused write to a linked destination changed its target to %q", got)
	}
	return nil
}

func probeTheWorkingDirectoryIsRefusedForWrite(ctx context.Context, s Subject, l Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	if err := sb.WriteFile(ctx, "control.txt", []byte("control"), wd); err != nil {
		return err
	}
	err := sb.WriteFile(ctx, ".", []byte("no"), wd)
	if f := refusedWith(confinement, "writing the working directory itself", err); f != nil {
		return f
	}
	return present(ctx, s, l.In("control.txt"), "the control file beside a refused write of the working directory")
}

func probeABackslashIsRefusedForWrite(ctx context.Context, s Subject, l Layout) error {
	err := s.Sandbox().WriteFile(ctx, `sub\file.txt`, []byte("no"), s.WorkingDirectory())
	if f := refusedWith(confinement, `writing sub\file.txt`, err); f != nil {
		return f
	}
	for _, rel := range []string{`sub\file.txt`, "sub/file.txt"} {
		if f := absent(ctx, s, l.In(rel), "a refused write of a path with a backslash landed"); f != nil {
			return f
		}
	}
	return nil
}

func probeALinkedWorkingDirectoryWrite(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.Out("marker.txt"), []byte("marker")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.LinkedDir(), l.Outside); err != nil {
		return err
	}
	err := s.Sandbox().WriteFile(ctx, "landed-linked-wd.txt", []byte("no"), l.LinkedDir())
	if f := refusedWith(confinement, "writing under a working directory that is itself a link", err); f != nil {
		return f
	}
	return absent(ctx, s, l.Out("landed-linked-wd.txt"), "a refused write under a linked working directory landed outside")
}

func probeALinkedAncestorWrite(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.Out("sub/marker.txt"), []byte("marker")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.LinkedDir(), l.Outside); err != nil {
		return err
	}
	err := s.Sandbox().WriteFile(ctx, "landed-linked-ancestor.txt", []byte("no"), l.UnderLinkedDir())
	if f := refusedWith(confinement, "writing under a working directory whose ancestor is a link", err); f != nil {
		return f
	}
	return absent(ctx, s, l.Out("sub/landed-linked-ancestor.txt"), "a refused write under a linked ancestor landed outside")
}

// probeAWriteLeavesNothingBeyondTheGuest lets the guest make a directory of its own, writes
// below it through parents the write has to create, and then has the guest program append
// to the written file and remove everything the write created. A write that created them at
// more authority than the guest's (root-owned, say, for a non-root guest) leaves something
// the guest cannot change or remove, and the probe names it.
func probeAWriteLeavesNothingBeyondTheGuest(ctx context.Context, s Subject, l Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	if _, err := guestRun(ctx, sb, wd, "mkdir", "-p", "reach-write"); err != nil {
		return failf("the guest could not make a directory of its own in its working directory, which this probe needs: %v", err)
	}
	file := "reach-write/made/by-the-write/leaf.txt"
	if err := sb.WriteFile(ctx, file, []byte("written"), wd); err != nil {
		return err
	}
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", `printf %s appended >> "$1"`, "reach", file), wd, PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("the guest program cannot write the file the write created (exit %d: %s)", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	res, err = sb.Exec(ctx, sandbox.Argv("rm", "-rf", "--", "reach-write/made"), wd, PlantTimeout)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return failf("the guest program cannot remove what the write created (rm exited %d: %s)", res.ExitCode, strings.TrimSpace(res.StderrText()))
	}
	return absent(ctx, s, l.In("reach-write/made"), "the guest program could not remove what the write created")
}
