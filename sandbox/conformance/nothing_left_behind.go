package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

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
//  1. The baseline fingerprint. [sandbox.ErrFingerprintUnsupported] gives one skipped result and call
//     is not run; any other error, or changed paths already there, fails before running call.
//  2. call. An error fails the run (the final state is still measured and compared, so the
//     report says what the failed call left).
//  3. The final fingerprint: a lost fingerprint or any measurement error fails.
//  4. Any path or program difference from the baseline fails, each named.
//
// Failures come back as a [*sandbox.ConformanceFailure] with the results. A skip is not a
// pass: callers assert that every result passed. A cancelled ctx is returned as the
// context's error, wrapped, and no verdict.
func AssertNothingLeftBehind(ctx context.Context, subject sandbox.FingerprintSubject, call func(ctx context.Context) error) ([]Result, error) {
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
	if errors.Is(err, sandbox.ErrFingerprintUnsupported) {
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
	c := sandbox.CompareFingerprints(before, after)
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
