package conformance

import (
	"bytes"
	"context"

	"github.com/mafsandbox/engine/sandbox"
)

// AssertFilesOutConformance plants the hostile layout (see [PlantLayout]) and runs the twelve
// FILES_OUT probes of protocol §14.2 against it: the pull surface (StatFile, ReadFile, and
// ListDir for the last four) must describe a link as a link, never read one, and refuse every
// path that passes through a link, whether the link is a parent, the working directory or an
// ancestor of it.
//
// It fails with [*sandbox.InvalidArgumentError] before planting when the subject does not
// declare files_out, with the planting error when the layout cannot be planted, and with a
// [*sandbox.ConformanceFailure] when any probe failed. The four listing probes are skipped
// when files_list is not declared. The results are returned whenever the probes ran.
func AssertFilesOutConformance(ctx context.Context, s Subject) ([]Result, error) {
	return filesOutSuite.assert(ctx, s)
}

var filesOutSuite = suite{
	name:     "FILES_OUT",
	requires: sandbox.FilesOut,
	plant:    PlantLayout,
	probes: []probe{
		{name: "a-legitimate-read-still-works", run: probeALegitimateReadStillWorks,
			why: "every other probe asserts a refusal, and a backend that refused everything would pass them all; this one fails when the layout never landed"},
		{name: "a-link-is-named-a-link", run: probeALinkIsNamedALink,
			why: "a caller has to tell an escape from a fifo, and 'other' cannot say which; a link's size would be its target string's length, a size of nothing anyone measured"},
		{name: "a-link-is-never-read", run: probeALinkIsNeverRead,
			why: "a link is refused whether or not its target would have resolved somewhere legitimate"},
		{name: "stat-through-a-linked-parent", run: probeStatThroughALinkedParent,
			why: "with out -> /etc, out/hostname would stat as a regular file: no byte crosses, but a type and a size from outside the working directory do"},
		{name: "read-through-a-linked-parent", run: probeReadThroughALinkedParent,
			why: "the same escape with the bytes attached, the one that empties the guest's surroundings"},
		{name: "a-linked-working-directory", run: probeALinkedWorkingDirectoryRead,
			why: "the working directory is a component too; a check of the path's own parents alone never looks at the directory it resolved against"},
		{name: "a-linked-ancestor-of-the-working-directory", run: probeALinkedAncestorRead,
			why: "the check starts above the working directory, not at it: this is the /maf-sandbox -> / case, which the linked working directory probe does not reach"},
		{name: "a-plain-parent-is-not-an-escape", run: probeAPlainParentIsNotAnEscape,
			why: "a regular file where a directory was expected is an ordinary ENOTDIR; calling it a confinement failure accuses the guest of an attack it did not make"},
		{name: "listing-a-linked-directory", needs: []sandbox.Capability{sandbox.FilesList}, run: probeListingALinkedDirectory,
			why: "listing a link enumerates through it as readily as a read does, so a listing checks the listed directory itself as well"},
		{name: "listing-through-a-linked-parent", needs: []sandbox.Capability{sandbox.FilesList}, run: probeListingThroughALinkedParent,
			why: "a listing hands back names a caller goes on to read, so it owes the same check as a read"},
		{name: "listing-under-a-linked-ancestor", needs: []sandbox.Capability{sandbox.FilesList}, run: probeListingUnderALinkedAncestor,
			why: "the ancestor case at the listing entry point as well as the path's own"},
		{name: "a-listing-names-its-links", needs: []sandbox.Capability{sandbox.FilesList}, run: probeAListingNamesItsLinks,
			why: "a link inside the working directory is reported, not hidden: a name handed back with its type erased is a name read without the warning"},
	},
}

func probeALegitimateReadStillWorks(ctx context.Context, s Subject, _ Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	st, err := sb.StatFile(ctx, InsideFile, wd)
	if err != nil {
		return err
	}
	switch {
	case st == nil:
		return failf("stat of the planted %s found nothing: the layout did not land", InsideFile)
	case st.Kind != sandbox.EntryFile:
		return failf("the planted regular file %s stats as %q", InsideFile, st.Kind)
	case st.Size == nil:
		return failf("the planted regular file %s stats with no size", InsideFile)
	case *st.Size != int64(len(InsideContent)):
		return failf("the planted file %s stats as %d bytes, not %d", InsideFile, *st.Size, len(InsideContent))
	}
	got, err := sb.ReadFile(ctx, InsideFile, wd, ReadCap)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, []byte(InsideContent)) {
		return failf("the planted file %s read back as %q, not %q", InsideFile, got, InsideContent)
	}
	return nil
}

func probeALinkIsNamedALink(ctx context.Context, s Subject, _ Layout) error {
	st, err := s.Sandbox().StatFile(ctx, LinkFile, s.WorkingDirectory())
	if err != nil {
		return err
	}
	switch {
	case st == nil:
		return failf("stat of the planted link %s found nothing: the layout did not land", LinkFile)
	case st.Kind != sandbox.EntrySymlink:
		return failf("the link %s stats as %q, not %q", LinkFile, st.Kind, sandbox.EntrySymlink)
	case st.Size != nil:
		return failf("the link %s reports %d bytes: that is the length of its target string, not of anything readable", LinkFile, *st.Size)
	}
	return nil
}

func probeALinkIsNeverRead(ctx context.Context, s Subject, _ Layout) error {
	got, err := s.Sandbox().ReadFile(ctx, LinkFile, s.WorkingDirectory(), ReadCap)
	if err == nil && bytes.Equal(got, []byte(SecretContent)) {
		return failf("reading the link %s returned the secret behind it", LinkFile)
	}
	return refusedWith(osLevel, "reading the link "+LinkFile, err)
}

func probeStatThroughALinkedParent(ctx context.Context, s Subject, _ Layout) error {
	_, err := s.Sandbox().StatFile(ctx, LinkDir+"/"+SecretFile, s.WorkingDirectory())
	return refusedWith(confinement, "stat through the linked parent "+LinkDir, err)
}

func probeReadThroughALinkedParent(ctx context.Context, s Subject, _ Layout) error {
	_, err := s.Sandbox().ReadFile(ctx, LinkDir+"/"+SecretFile, s.WorkingDirectory(), ReadCap)
	return refusedWith(confinement, "read through the linked parent "+LinkDir, err)
}

func probeALinkedWorkingDirectoryRead(ctx context.Context, s Subject, l Layout) error {
	sb := s.Sandbox()
	_, err := sb.StatFile(ctx, SecretFile, l.LinkedDir())
	if f := refusedWith(confinement, "stat against a working directory that is itself a link", err); f != nil {
		return f
	}
	_, err = sb.ReadFile(ctx, SecretFile, l.LinkedDir(), ReadCap)
	return refusedWith(confinement, "read against a working directory that is itself a link", err)
}

func probeALinkedAncestorRead(ctx context.Context, s Subject, l Layout) error {
	sb, leaf := s.Sandbox(), "leaf.txt"
	_, err := sb.StatFile(ctx, leaf, l.UnderLinkedDir())
	if f := refusedWith(confinement, "stat under a working directory whose ancestor is a link", err); f != nil {
		return f
	}
	_, err = sb.ReadFile(ctx, leaf, l.UnderLinkedDir(), ReadCap)
	return refusedWith(confinement, "read under a working directory whose ancestor is a link", err)
}

func probeAPlainParentIsNotAnEscape(ctx context.Context, s Subject, _ Layout) error {
	_, err := s.Sandbox().StatFile(ctx, PlainFile+"/deeper.txt", s.WorkingDirectory())
	return refusedWith(notDirectory, "stat through the regular file "+PlainFile, err)
}

func probeListingALinkedDirectory(ctx context.Context, s Subject, _ Layout) error {
	_, err := s.Sandbox().ListDir(ctx, LinkDir, s.WorkingDirectory())
	return refusedWith(confinement, "listing the linked directory "+LinkDir, err)
}

func probeListingThroughALinkedParent(ctx context.Context, s Subject, _ Layout) error {
	_, err := s.Sandbox().ListDir(ctx, LinkDir+"/sub", s.WorkingDirectory())
	return refusedWith(confinement, "listing through the linked parent "+LinkDir, err)
}

func probeListingUnderALinkedAncestor(ctx context.Context, s Subject, l Layout) error {
	_, err := s.Sandbox().ListDir(ctx, ".", l.UnderLinkedDir())
	return refusedWith(confinement, "listing a working directory whose ancestor is a link", err)
}

func probeAListingNamesItsLinks(ctx context.Context, s Subject, _ Layout) error {
	entries, err := s.Sandbox().ListDir(ctx, ".", s.WorkingDirectory())
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Path == LinkFile {
			if e.Kind != sandbox.EntrySymlink {
				return failf("%s is listed as %q, not %q", LinkFile, e.Kind, sandbox.EntrySymlink)
			}
			return nil
		}
		names = append(names, e.Path)
	}
	return failf("the working directory's listing does not name %s at all (it names %q): hiding a link leaves a caller a name to read with no warning attached", LinkFile, names)
}
