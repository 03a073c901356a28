package sandbox

import (
	"context"
	"errors"
	"slices"
)

// The fingerprint of protocol §14.8 is the model the nothing-left-behind proof is built on: the
// engine measures a sandbox before and after a kind's call and compares. It lives here, with
// the protocol, because the engine itself serves it (the fingerprint API); the probe that uses
// it is in the conformance kit, which only tests import.

// Fingerprint is what an engine answers about a sandbox's state (protocol §14.8): the paths
// changed since the sandbox was created, and the identities of the programs running in it,
// which tell a restarted program from the original. Both are sets; build one with
// [NewFingerprint], which sorts and deduplicates them. The zero value is the empty
// fingerprint.
type Fingerprint struct {
	changed  []string
	programs []string
}

// NewFingerprint builds the fingerprint of the two sets. Order and repeats in the arguments
// do not matter; the slices are copied.
func NewFingerprint(changedPaths, runningPrograms []string) Fingerprint {
	return Fingerprint{changed: sortedSet(changedPaths), programs: sortedSet(runningPrograms)}
}

// ChangedPaths returns the changed paths, sorted (a copy).
func (f Fingerprint) ChangedPaths() []string { return slices.Clone(f.changed) }

// RunningPrograms returns the program identities, sorted (a copy).
func (f Fingerprint) RunningPrograms() []string { return slices.Clone(f.programs) }

// Equal reports whether the two fingerprints hold the same sets.
func (f Fingerprint) Equal(g Fingerprint) bool {
	return slices.Equal(f.changed, g.changed) && slices.Equal(f.programs, g.programs)
}

func sortedSet(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// ErrFingerprintUnsupported is what a [FingerprintSubject] returns, wrapped with its reason,
// when it cannot measure this engine at all (a Docker daemon that does not run Linux). The
// probe turns it into a skipped result, never a pass.
var ErrFingerprintUnsupported = errors.New("sandbox: fingerprint unsupported on this engine")

// FingerprintSubject measures one sandbox, from the engine's side (protocol §14.8). An engine
// subject must refuse storage its measurement cannot see, and must cover implicit storage such
// as /dev/shm; kernel state and sockets are out of scope.
type FingerprintSubject interface {
	// Fingerprint measures the sandbox now. It fails with [ErrFingerprintUnsupported] (wrapped)
	// when the engine cannot be measured, and with any other error when it refuses to measure
	// or a measurement cannot be read; the probe fails on either, never passes.
	Fingerprint(ctx context.Context) (Fingerprint, error)
}

// FingerprintComparison is what [CompareFingerprints] finds between a baseline and a final fingerprint:
// each set's additions and removals, sorted.
type FingerprintComparison struct {
	PathsAdded, PathsRemoved       []string
	ProgramsAdded, ProgramsRemoved []string
}

// Clean reports whether the two fingerprints were equal.
func (c FingerprintComparison) Clean() bool {
	return len(c.PathsAdded)+len(c.PathsRemoved)+len(c.ProgramsAdded)+len(c.ProgramsRemoved) == 0
}

// CompareFingerprints compares a final fingerprint with its baseline.
func CompareFingerprints(before, after Fingerprint) FingerprintComparison {
	return FingerprintComparison{
		PathsAdded:      setMinus(after.changed, before.changed),
		PathsRemoved:    setMinus(before.changed, after.changed),
		ProgramsAdded:   setMinus(after.programs, before.programs),
		ProgramsRemoved: setMinus(before.programs, after.programs),
	}
}

// setMinus is a − b over sorted sets.
func setMinus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
