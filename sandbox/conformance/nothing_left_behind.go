package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

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
	return Fingerprint{changed: set(changedPaths), programs: set(runningPrograms)}
}

// ChangedPaths returns the changed paths, sorted (a copy).
func (f Fingerprint) ChangedPaths() []string { return slices.Clone(f.changed) }

// RunningPrograms returns the program identities, sorted (a copy).
func (f Fingerprint) RunningPrograms() []string { return slices.Clone(f.programs) }

// Equal reports whether the two fingerprints hold the same sets.
func (f Fingerprint) Equal(g Fingerprint) bool {
	return slices.Equal(f.changed, g.changed) && slices.Equal(f.programs, g.programs)
}

func set(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

// ErrFingerprintUnsupported is what a [FingerprintSubject] returns, wrapped with its reason,
// when it cannot measure this engine at all (a Docker daemon that does not run Linux). The
// probe turns it into a skipped result, never a pass.
var ErrFingerprintUnsupported = errors.New("conformance: fingerprint unsupported on this engine")

// FingerprintSubject measures one sandbox, from the engine's side (protocol §14.8). An engine
// subject must refuse storage its measurement cannot see, and must cover implicit storage such
// as /dev/shm; kernel state and sockets are out of scope.
type FingerprintSubject interface {
	// Fingerprint measures the sandbox now. It fails with [ErrFingerprintUnsupported] (wrapped)
	// when the engine cannot be measured, and with any other error when it refuses to measure
	// or a measurement cannot be read; the probe fails on either, never passes.
	Fingerprint(ctx context.Context) (Fingerprint, error)
}

// Comparison is what [CompareFingerprints] finds between a baseline and a final fingerprint:
// each set's additions and removals, sorted.
type Comparison struct {
	PathsAdded, PathsRemoved       []string
	ProgramsAdded, ProgramsRemoved []string
}

// Clean reports whether the two fingerprints were equal.
func (c Comparison) Clean() bool {
	return len(c.PathsAdded)+len(c.PathsRemoved)+len(c.ProgramsAdded)+len(c.ProgramsRemoved) == 0
}

// CompareFingerprints compares a final fingerprint with its baseline.
func CompareFingerprints(before, after Fingerprint) Comparison {
	return Comparison{
		PathsAdded:      minus(after.changed, before.changed),
		PathsRemoved:    minus(before.changed, after.changed),
		ProgramsAdded:   minus(after.programs, before.programs),
		ProgramsRemoved: minus(before.programs, after.programs),
	}
}

// minus is a − b over sorted sets.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}

// The probes of the nothing-left-behind suite, in the order they can fail.
const (
	probeBaselinePristine = "the-baseline-is-pristine"
	probeCallRan          = "the-call-and-its-cleanup-ran"
	probeFinalMeasured    = "the-final-state-is-measured"
	probeNoPathChanged    = "no-path-is-left-changed"
	probeNoProgramChanged = "no-program-is-left-running-or-replaced"
)

var nothingLeftBehindWhy = map[string]string{
	probeBaselinePristine: "a path already changed can hide a second write to the same path, so a dirty baseline proves nothing",
	probeCallRan:          "a call that failed may not have done what the kind really does, so its silence proves nothing",
	probeFinalMeasured:    "a final state that could not be read is not a clean one",
	probeNoPathChanged:    "a file the call left, changed or removed is read by the next conversation that reuses the sandbox",
	probeNoProgramChanged: "a program the call left running, or replaced, acts in the next conversation that reuses the sandbox",
}

// AssertNothingLeftBehind runs protocol §14.8 on subject: a kind claiming
// ConfinedToGuestCallPath proves it with its real call plus its cleanup (call) on a freshly
// acquired sandbox.
//
//  1. The baseline fingerprint. [ErrFingerprintUnsupported] gives one skipped result and call
//     is not run; any other error, or changed paths already there, fails before running call.
//  2. call. An error fails the run (the final state is still measured and compared, so the
//     report says what the failed call left).
//  3. The final fingerprint: a lost fingerprint or any measurement error fails.
//  4. Any path or program difference from the baseline fails, each named.
//
// Failures come back as a [*sandbox.ConformanceFailure] with the results. A skip is not a
// pass: callers assert that every result passed. A cancelled ctx is returned as the
// context's error, wrapped, and no verdict.
func AssertNothingLeftBehind(ctx context.Context, subject FingerprintSubject, call func(ctx context.Context) error) ([]Result, error) {
	if subject == nil || call == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "conformance: nothing-left-behind needs a subject and a call"}
	}
	const suiteName = "NOTHING_LEFT_BEHIND"
	result := func(name string, err error) Result {
		r := Result{Name: name, Why: nothingLeftBehindWhy[name], Passed: err == nil}
		if err != nil {
			r.Reason = err.Error()
		}
		return r
	}
	before, err := subject.Fingerprint(ctx)
	if errors.Is(err, ErrFingerprintUnsupported) {
		return []Result{{Name: "nothing-left-behind", Skipped: true, Reason: err.Error(),
			Why: "an engine that cannot be measured proves nothing either way"}}, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("nothing-left-behind baseline: %w", cerr)
	}
	if err != nil {
		rs := []Result{result(probeBaselinePristine, fmt.Errorf("the baseline was refused or could not be measured: %w", err))}
		return rs, verdict(suiteName, rs)
	}
	if changed := before.ChangedPaths(); len(changed) > 0 {
		rs := []Result{result(probeBaselinePristine, fmt.Errorf("the sandbox is not pristine before the call: %s",
			strings.Join(changed, ", ")))}
		return rs, verdict(suiteName, rs)
	}
	results := []Result{result(probeBaselinePristine, nil)}

	callErr := runCall(ctx, call)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("nothing-left-behind call: %w", cerr)
	}
	if callErr != nil {
		callErr = fmt.Errorf("the call failed: %w", callErr)
	}
	results = append(results, result(probeCallRan, callErr))

	after, err := subject.Fingerprint(ctx)
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("nothing-left-behind final fingerprint: %w", cerr)
	}
	if err != nil {
		results = append(results, result(probeFinalMeasured, fmt.Errorf("the final state could not be measured: %w", err)))
		return results, verdict(suiteName, results)
	}
	results = append(results, result(probeFinalMeasured, nil))
	c := CompareFingerprints(before, after)
	results = append(results,
		result(probeNoPathChanged, differences("paths changed since the baseline", c.PathsAdded,
			"changed paths of the baseline no longer changed", c.PathsRemoved)),
		result(probeNoProgramChanged, differences("programs not in the baseline", c.ProgramsAdded,
			"programs of the baseline gone", c.ProgramsRemoved)))
	return results, verdict(suiteName, results)
}

// runCall runs call, turning a panic into its error.
func runCall(ctx context.Context, call func(ctx context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panicked: %v", v)
		}
	}()
	return call(ctx)
}

// differences names what changed in one set, or is nil when nothing did.
func differences(addedLabel string, added []string, removedLabel string, removed []string) error {
	if len(added)+len(removed) == 0 {
		return nil
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, addedLabel+": "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, removedLabel+": "+strings.Join(removed, ", "))
	}
	return errors.New(strings.Join(parts, "; "))
}
