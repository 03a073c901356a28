package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/mafsandbox/engine/sandbox"
)

// Result is what one probe did. Passed and Skipped are never both true; a probe that did
// neither failed. Reason is the failure text or the skip reason, and Why says what the probe
// is in the suite for.
type Result struct {
	Name    string
	Passed  bool
	Skipped bool
	Reason  string
	Why     string
}

// Failed reports whether the probe ran and did not pass.
func (r Result) Failed() bool { return !r.Passed && !r.Skipped }

// probe is one attack, with the reason it is in the suite: a probe whose point is not
// written down is a probe someone deletes when it fails.
type probe struct {
	name string
	why  string
	// needs lists capabilities beyond the suite's required one; undeclared, the probe is skipped.
	needs []sandbox.Capability
	run   func(ctx context.Context, s Subject, l Layout) error
}

// failure is a probe's check not holding, as opposed to an error raised on the way.
type failure struct{ msg string }

func (f *failure) Error() string { return f.msg }

// failf builds a check failure.
func failf(format string, args ...any) error { return &failure{msg: fmt.Sprintf(format, args...)} }

// suite is one named suite: the capability it requires, how it prepares, and its probes in
// order. It requires one capability, or, when requires is empty, any of anyOf.
type suite struct {
	name     string
	requires sandbox.Capability
	anyOf    []sandbox.Capability
	plant    func(ctx context.Context, s Subject) (Layout, error)
	probes   []probe
}

// admits reports whether declared has what the suite requires, and names it.
func (st suite) admits(declared sandbox.CapabilitySet) (bool, string) {
	if st.requires != "" {
		return declared.Has(st.requires), string(st.requires)
	}
	names := make([]string, len(st.anyOf))
	for i, c := range st.anyOf {
		if declared.Has(c) {
			return true, ""
		}
		names[i] = string(c)
	}
	return false, "any of " + strings.Join(names, ", ")
}

// run checks the required capability, prepares and runs every probe. An undeclared one fails with
// [*sandbox.InvalidArgumentError] before anything is planted; a preparation failure or a
// cancelled ctx fails the run rather than any probe.
func (st suite) run(ctx context.Context, s Subject, required bool) ([]Result, error) {
	if s == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "conformance: no subject"}
	}
	declared := s.Capabilities()
	if ok, capability := st.admits(declared); required && !ok {
		return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
			"conformance: the subject declares no %s, so every %s probe would be skipped and the run would pass "+
				"having attacked nothing; pass the backend's own declared capabilities, not a narrower set", capability, st.name)}
	}
	l, err := st.plant(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("prepare the %s probes: %w", st.name, err)
	}
	results := make([]Result, 0, len(st.probes))
	for _, p := range st.probes {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("run the %s probes: %w", st.name, err)
		}
		var missing []string
		for _, c := range p.needs {
			if !declared.Has(c) {
				missing = append(missing, string(c))
			}
		}
		if required && len(missing) > 0 {
			results = append(results, Result{Name: p.name, Skipped: true, Why: p.why,
				Reason: "backend does not declare " + strings.Join(missing, ", ")})
			continue
		}
		results = append(results, runProbe(ctx, p, s, l))
	}
	return results, nil
}

// assert runs the suite and turns any failed probe into a [*sandbox.ConformanceFailure].
func (st suite) assert(ctx context.Context, s Subject) ([]Result, error) {
	results, err := st.run(ctx, s, true)
	if err != nil {
		return nil, err
	}
	return results, verdict(st.name, results)
}

// verdict is nil when no probe failed, else the failure naming each failed probe.
func verdict(name string, results []Result) error {
	cf := &sandbox.ConformanceFailure{Suite: name, Total: len(results)}
	for _, r := range results {
		if r.Failed() {
			cf.Failures = append(cf.Failures, sandbox.ProbeFailure{Name: r.Name, Reason: r.Reason, Why: r.Why})
		}
	}
	if len(cf.Failures) == 0 {
		return nil
	}
	return cf
}

// runProbe runs one probe and turns whatever it did into its result. A panic in the
// sandbox under test is a failure of this probe too, not of the run.
func runProbe(ctx context.Context, p probe, s Subject, l Layout) (r Result) {
	r = Result{Name: p.name, Why: p.why}
	defer func() {
		if v := recover(); v != nil {
			r.Passed, r.Reason = false, fmt.Sprintf("panicked: %v", v)
		}
	}()
	err := p.run(ctx, s, l)
	var f *failure
	switch {
	case err == nil:
		r.Passed = true
	case errors.As(err, &f):
		r.Reason = f.msg
	default:
		r.Reason = fmt.Sprintf("raised %s: %v", errorType(err), err)
	}
	return r
}

// errorType names the most telling type in err's chain: the first that is not one of the
// standard library's plain wrappers, so a wrapped *sandbox.NotConfinedError is named as such.
func errorType(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch t := fmt.Sprintf("%T", e); t {
		case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.errorString":
		default:
			return t
		}
	}
	return fmt.Sprintf("%T", err)
}

// family is the class of error a refusal check accepts, and only that class.
type family struct {
	name string
	is   func(error) bool
}

var (
	// confinement is the invalid-argument family, where [*sandbox.NotConfinedError] lives.
	confinement = family{"a confinement refusal (the invalid-argument family)", func(err error) bool {
		return errors.Is(err, sandbox.ErrInvalid)
	}}
	// osLevel is the OS-level family: not a regular file, is a directory, permission.
	osLevel = family{"an OS-level error", func(err error) bool { return errors.Is(err, sandbox.ErrOS) }}
	// notDirectory is ENOTDIR and not a confinement refusal: the guest tripped, it did not
	// escape.
	notDirectory = family{"a not-a-directory error (not a confinement refusal)", func(err error) bool {
		return errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, sandbox.ErrInvalid)
	}}
	// timeout is the caller's timeout expiring.
	timeout = family{"a timeout error", func(err error) bool { return errors.Is(err, sandbox.ErrTimeout) }}
)

// refusedWith checks that err, what a call named by what returned, is a refusal of family f.
// No error and an error of another family are both failures: a suite accepting any refusal
// could not tell an escape from an ENOTDIR, which is the distinction it exists to check.
func refusedWith(f family, what string, err error) error {
	switch {
	case err == nil:
		return failf("%s returned instead of failing with %s", what, f.name)
	case !f.is(err):
		return failf("%s failed with %s (%v), not %s", what, errorType(err), err, f.name)
	}
	return nil
}
