package conformance

import (
	"context"
	"fmt"

	"github.com/mafsandbox/engine/sandbox"
)

// AssertFilesDeleteConformance runs the ten FILES_DELETE probes of protocol §14.5: Remove
// removes what it names and nothing beside it, succeeds on a missing path, unlinks a link
// (at the target or inside a removed tree) without following it, needs recursive for any
// directory, empty or not, and refuses the working directory, a path outside it and a path
// through a linked parent, leaving what it refused in place. Each probe plants and removes
// its own fixtures and verifies through Exec.
//
// It fails with [*sandbox.InvalidArgumentError] when the subject does not declare
// files_delete, and with a [*sandbox.ConformanceFailure] when any probe failed. The results
// are returned whenever the probes ran.
func AssertFilesDeleteConformance(ctx context.Context, s Subject) ([]Result, error) {
	return filesDeleteSuite.assert(ctx, s)
}

// MeasureFilesDeleteProbes runs every FILES_DELETE probe with no required capability and no verdict: the
// measurement a backend that implements Remove but does not declare files_delete runs to
// find out what its mechanism does before it may declare it. Each result says whether the
// probe passed or how it failed; nothing is skipped and no [*sandbox.ConformanceFailure] is
// returned. It fails only when the run itself cannot proceed (no subject, an unusable
// working directory, a cancelled ctx).
func MeasureFilesDeleteProbes(ctx context.Context, s Subject) ([]Result, error) {
	return filesDeleteSuite.run(ctx, s, false)
}

var filesDeleteSuite = suite{
	name:     "FILES_DELETE",
	requires: sandbox.FilesDelete,
	plant:    layoutOnly,
	probes: []probe{
		{name: "a-removal-removes", run: probeARemovalRemoves,
			why: "the positive control, scoped: a backend that removed nothing would pass every refusal here, and one that removed more than the path is not removing the path"},
		{name: "a-missing-path-is-success", run: probeAMissingPathIsSuccess,
			why: "cleanup runs after whatever went wrong already did, often twice; a missing path raising a second failure buries the first"},
		{name: "a-link-is-removed-never-followed", run: probeALinkIsRemovedNeverFollowed,
			why: "a removal resolving a link deletes a target the guest chose outside the working directory; recursive may select another operation entirely, so both values are asked"},
		{name: "a-path-through-a-linked-parent-is-refused", run: probeARemovalThroughALinkedParentIsRefused,
			why: "a path whose parent is a link passes the name check and still reaches outside the working directory; a refusal after the damage is no refusal"},
		{name: "a-directory-needs-recursive", run: probeADirectoryNeedsRecursive,
			why: "recursive is a word the caller has to say: without it an irreversible tree removal reads like a single-file delete at the call site"},
		{name: "an-empty-directory-needs-recursive", run: probeAnEmptyDirectoryNeedsRecursive,
			why: "a backend without enumeration cannot tell empty from full, so empty is not carved out; and recursive must then remove it"},
		{name: "recursive-removes-the-tree", run: probeRecursiveRemovesTheTree,
			why: "the capability's other half, scoped to the tree: its neighbour stays"},
		{name: "a-link-inside-a-recursive-removal-is-unlinked-not-followed", run: probeALinkInsideARecursiveRemoval,
			why: "a recursive delete resolving an interior link deletes a target outside the working directory; only this shape reaches that escape"},
		{name: "the-working-directory-is-refused", run: probeTheWorkingDirectoryIsRefusedForRemoval,
			why: "the working directory is the confinement root; removing it takes the next call's ground with it"},
		{name: "a-path-outside-is-refused", run: probeARemovalOutsideIsRefused,
			why: "the boundary itself: a removal reaching outside needs no link to do its damage"},
	},
}

// removalCases are the two values of recursive, each asked on its own specimen.
var removalCases = []bool{false, true}

func probeARemovalRemoves(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("doomed.txt"), []byte("to be removed\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("bystander.txt"), []byte("not the target\n")); err != nil {
		return err
	}
	if err := s.Sandbox().Remove(ctx, "doomed.txt", s.WorkingDirectory(), false); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("doomed.txt"), "the removed file is still there"); f != nil {
		return f
	}
	return present(ctx, s, l.In("bystander.txt"), "a bystander file")
}

func probeAMissingPathIsSuccess(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("was-here.txt"), []byte("gone after the first call\n")); err != nil {
		return err
	}
	for i := range 2 {
		if err := s.Sandbox().Remove(ctx, "was-here.txt", s.WorkingDirectory(), false); err != nil {
			return failf("removal %d of 2 of was-here.txt failed: %v", i+1, err)
		}
	}
	return nil
}

func probeALinkIsRemovedNeverFollowed(ctx context.Context, s Subject, l Layout) error {
	target := l.Out("target.txt")
	if err := s.PlantFile(ctx, target, []byte("outside\n")); err != nil {
		return err
	}
	for _, recursive := range removalCases {
		name := fmt.Sprintf("link-out-recursive-%t", recursive)
		if err := s.PlantSymlink(ctx, l.In(name), target); err != nil {
			return err
		}
		if err := s.Sandbox().Remove(ctx, name, s.WorkingDirectory(), recursive); err != nil {
			return err
		}
		if f := absent(ctx, s, l.In(name), fmt.Sprintf("the removed link is still there (recursive=%t)", recursive)); f != nil {
			return f
		}
		if f := present(ctx, s, target, fmt.Sprintf("the link's target (the removal followed the link, recursive=%t)", recursive)); f != nil {
			return f
		}
	}
	return nil
}

func probeARemovalThroughALinkedParentIsRefused(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.Out("target.txt"), []byte("outside\n")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.LinkedDir(), l.Outside); err != nil {
		return err
	}
	for _, recursive := range removalCases {
		err := s.Sandbox().Remove(ctx, LinkDir+"/target.txt", s.WorkingDirectory(), recursive)
		if f := refusedWith(confinement, fmt.Sprintf("removing through the linked parent %s (recursive=%t)", LinkDir, recursive), err); f != nil {
			return f
		}
		// Only worth its error type if nothing crossed: a backend that followed the link,
		// deleted the target and then refused would pass the check above.
		if f := present(ctx, s, l.Out("target.txt"), fmt.Sprintf("the target behind a refused linked-parent removal (recursive=%t)", recursive)); f != nil {
			return f
		}
	}
	return nil
}

func probeADirectoryNeedsRecursive(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("dir/keeps.txt"), []byte("a directory\n")); err != nil {
		return err
	}
	err := s.Sandbox().Remove(ctx, "dir", s.WorkingDirectory(), false)
	if f := refusedWith(osLevel, "removing a non-empty directory without recursive", err); f != nil {
		return f
	}
	return present(ctx, s, l.In("dir/keeps.txt"), "the content of a directory whose removal was refused")
}

func probeAnEmptyDirectoryNeedsRecursive(ctx context.Context, s Subject, l Layout) error {
	sb, wd := s.Sandbox(), s.WorkingDirectory()
	// Planted by the guest: PlantFile cannot make an empty anything.
	if _, err := guestRun(ctx, sb, "/", "mkdir", "-p", l.In("empty")); err != nil {
		return err
	}
	err := sb.Remove(ctx, "empty", wd, false)
	if f := refusedWith(osLevel, "removing an empty directory without recursive", err); f != nil {
		return f
	}
	if f := present(ctx, s, l.In("empty"), "an empty directory whose removal was refused"); f != nil {
		return f
	}
	if err := sb.Remove(ctx, "empty", wd, true); err != nil {
		return err
	}
	return absent(ctx, s, l.In("empty"), "an empty directory survived a recursive removal")
}

func probeRecursiveRemovesTheTree(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("tree/leaf.txt"), []byte("in the tree\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("next-to-tree.txt"), []byte("not in the tree\n")); err != nil {
		return err
	}
	if err := s.Sandbox().Remove(ctx, "tree", s.WorkingDirectory(), true); err != nil {
		return err
	}
	for _, rel := range []string{"tree/leaf.txt", "tree"} {
		if f := absent(ctx, s, l.In(rel), "a recursive removal of the tree left part of it"); f != nil {
			return f
		}
	}
	return present(ctx, s, l.In("next-to-tree.txt"), "a file beside the tree")
}

func probeALinkInsideARecursiveRemoval(ctx context.Context, s Subject, l Layout) error {
	target := l.Out("interior-target.txt")
	if err := s.PlantFile(ctx, target, []byte("outside the tree\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("linked-tree/leaf.txt"), []byte("in the tree\n")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.In("linked-tree/inside-link"), target); err != nil {
		return err
	}
	if err := s.Sandbox().Remove(ctx, "linked-tree", s.WorkingDirectory(), true); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("linked-tree"), "the recursively removed tree is still there"); f != nil {
		return f
	}
	return present(ctx, s, target, "the target of a link inside the removed tree (the removal followed an interior link)")
}

func probeTheWorkingDirectoryIsRefusedForRemoval(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("ground.txt"), []byte("still standing\n")); err != nil {
		return err
	}
	for _, recursive := range removalCases {
		err := s.Sandbox().Remove(ctx, ".", s.WorkingDirectory(), recursive)
		if f := refusedWith(confinement, fmt.Sprintf("removing the working directory itself (recursive=%t)", recursive), err); f != nil {
			return f
		}
		if f := present(ctx, s, l.In("ground.txt"), fmt.Sprintf("a file in the working directory whose removal was refused (recursive=%t)", recursive)); f != nil {
			return f
		}
	}
	return nil
}

func probeARemovalOutsideIsRefused(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.Out("target.txt"), []byte("outside\n")); err != nil {
		return err
	}
	for _, recursive := range removalCases {
		err := s.Sandbox().Remove(ctx, l.Beyond("target.txt"), s.WorkingDirectory(), recursive)
		if f := refusedWith(confinement, fmt.Sprintf("removing %s (recursive=%t)", l.Beyond("target.txt"), recursive), err); f != nil {
			return f
		}
		if f := present(ctx, s, l.Out("target.txt"), fmt.Sprintf("the target of a refused removal outside the working directory (recursive=%t)", recursive)); f != nil {
			return f
		}
	}
	return nil
}
