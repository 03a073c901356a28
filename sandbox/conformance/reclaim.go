package conformance

import (
	"context"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// AssertReclaimConformance plants work/.probe-cwd and runs the reclaim probes of protocol
// §14.6: Reclaim removes the directory it names with everything beneath it and nothing
// beside it, unlinks a link inside without following it, succeeds on a missing directory
// (twice in a row) and succeeds when the working directory itself is absent. The probes look
// at what survived through the subject's [PathObserver] when it has one, otherwise through
// Exec.
//
// It fails with [*sandbox.InvalidArgumentError] before planting when the subject does not
// declare reclaim (a backend that cannot reclaim safely must refuse rather than declare it),
// and with a [*sandbox.ConformanceFailure] when any probe failed. The results are returned
// whenever the probes ran.
func AssertReclaimConformance(ctx context.Context, s Subject) ([]Result, error) {
	return reclaimSuite.assert(ctx, s)
}

// reclaimTimeout is the timeout every probe passes to Reclaim.
const reclaimTimeout = 60 * time.Second

var reclaimSuite = suite{
	name:     "RECLAIM",
	requires: sandbox.Reclaim,
	plant:    layoutWithMarker,
	probes: []probe{
		{name: "a-created-directory-is-gone", run: probeACreatedDirectoryIsGone,
			why: "the positive control, scoped: a reclaim that did nothing would pass every other probe, and one that took a neighbour is not reclaiming the directory"},
		{name: "nested-content-goes-with-it", run: probeNestedContentGoesWithIt,
			why: "a call's directory is a tree; removing only its top entry leaves the rest for the next call to read"},
		{name: "a-link-inside-is-unlinked-not-followed", run: probeALinkInsideIsUnlinkedNotFollowed,
			why: "the guest plants what it likes inside the directory; a removal following a link deletes a file outside the working directory on every cleanup"},
		{name: "a-missing-directory-is-success", run: probeAMissingDirectoryIsSuccess,
			why: "cleanup runs after whatever went wrong already did, often twice; a second failure over the first buries the real one"},
		{name: "an-absent-working-directory-still-succeeds", run: probeAnAbsentWorkingDirectoryStillSucceeds,
			why: "the working directory says where the directory sits, not where to run from; a call that wrote nothing leaves it absent"},
	},
}

func probeACreatedDirectoryIsGone(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("reclaim-me/note.txt"), []byte("a call's own file\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("reclaim-bystander.txt"), []byte("not the target\n")); err != nil {
		return err
	}
	if err := s.Sandbox().Reclaim(ctx, l.In("reclaim-me"), s.WorkingDirectory(), reclaimTimeout); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("reclaim-me"), "the reclaimed directory is still there"); f != nil {
		return f
	}
	return present(ctx, s, l.In("reclaim-bystander.txt"), "a bystander file beside the reclaimed directory")
}

func probeNestedContentGoesWithIt(ctx context.Context, s Subject, l Layout) error {
	for _, rel := range []string{"reclaim-tree/deep/nested/leaf.txt", "reclaim-tree/top.txt"} {
		if err := s.PlantFile(ctx, l.In(rel), []byte("in the tree\n")); err != nil {
			return err
		}
	}
	if err := s.Sandbox().Reclaim(ctx, l.In("reclaim-tree"), s.WorkingDirectory(), reclaimTimeout); err != nil {
		return err
	}
	for _, rel := range []string{"reclaim-tree/deep/nested/leaf.txt", "reclaim-tree"} {
		if f := absent(ctx, s, l.In(rel), "part of the reclaimed tree survived"); f != nil {
			return f
		}
	}
	return nil
}

func probeALinkInsideIsUnlinkedNotFollowed(ctx context.Context, s Subject, l Layout) error {
	target := l.Out("reclaim-target.txt")
	if err := s.PlantFile(ctx, target, []byte("outside the directory\n")); err != nil {
		return err
	}
	if err := s.PlantFile(ctx, l.In("reclaim-linked/leaf.txt"), []byte("in the directory\n")); err != nil {
		return err
	}
	if err := s.PlantSymlink(ctx, l.In("reclaim-linked/inside-link"), target); err != nil {
		return err
	}
	if err := s.Sandbox().Reclaim(ctx, l.In("reclaim-linked"), s.WorkingDirectory(), reclaimTimeout); err != nil {
		return err
	}
	if f := absent(ctx, s, l.In("reclaim-linked"), "the reclaimed directory is still there"); f != nil {
		return f
	}
	return present(ctx, s, target, "the target of a link inside the reclaimed directory (the removal followed the link)")
}

func probeAMissingDirectoryIsSuccess(ctx context.Context, s Subject, l Layout) error {
	if err := s.PlantFile(ctx, l.In("reclaim-twice/note.txt"), []byte("gone after the first\n")); err != nil {
		return err
	}
	for i := range 2 {
		if err := s.Sandbox().Reclaim(ctx, l.In("reclaim-twice"), s.WorkingDirectory(), reclaimTimeout); err != nil {
			return failf("reclaim %d of 2 of reclaim-twice failed: %v", i+1, err)
		}
	}
	return absent(ctx, s, l.In("reclaim-twice"), "the reclaimed directory is still there")
}

func probeAnAbsentWorkingDirectoryStillSucceeds(ctx context.Context, s Subject, l Layout) error {
	wd := l.In("absent-work")
	if f := absent(ctx, s, wd, "the probe's absent working directory"); f != nil {
		return f
	}
	if err := s.Sandbox().Reclaim(ctx, l.In("absent-work/call-a1b2c3"), wd, reclaimTimeout); err != nil {
		return failf("reclaim under an absent working directory failed: %v", err)
	}
	return nil
}
