package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// scriptedSubject answers each Fingerprint call with the next scripted answer and counts calls.
type scriptedSubject struct {
	answers []answer
	calls   int
}

type answer struct {
	fp  sandbox.Fingerprint
	err error
}

func (s *scriptedSubject) Fingerprint(context.Context) (sandbox.Fingerprint, error) {
	if s.calls >= len(s.answers) {
		return sandbox.Fingerprint{}, errors.New("no more scripted fingerprints")
	}
	a := s.answers[s.calls]
	s.calls++
	return a.fp, a.err
}

func fp(paths, programs []string) answer { return answer{fp: sandbox.NewFingerprint(paths, programs)} }

func TestAssertNothingLeftBehind(t *testing.T) {
	quiet := []string{"1:100 sleep"}
	errMeasure := errors.New("observer output unreadable")
	cases := []struct {
		name       string
		answers    []answer
		callErr    error
		callPanics bool
		wantCall   bool
		wantSkip   bool
		wantFail   []string // failed probes, in order
		wantReason []string // substrings of the failure text
	}{
		{name: "clean call passes", answers: []answer{fp(nil, quiet), fp(nil, quiet)}, wantCall: true},
		{name: "unsupported engine is one skip and no call",
			answers:  []answer{{err: fmt.Errorf("daemon runs windows: %w", sandbox.ErrFingerprintUnsupported)}},
			wantSkip: true},
		{name: "dirty baseline fails before the call", answers: []answer{fp([]string{"/tmp/x"}, quiet)},
			wantFail: []string{probeBaselinePristine}, wantReason: []string{"not pristine", "/tmp/x"}},
		{name: "unmeasurable baseline fails before the call", answers: []answer{{err: errMeasure}},
			wantFail: []string{probeBaselinePristine}, wantReason: []string{"observer output unreadable"}},
		{name: "a new path fails naming it", answers: []answer{fp(nil, quiet), fp([]string{"/work/left.txt", "/work"}, quiet)},
			wantCall: true, wantFail: []string{probeNoPathChanged}, wantReason: []string{"/work/left.txt", "/work"}},
		{name: "a program left running fails naming it",
			answers:  []answer{fp(nil, quiet), fp(nil, append([]string{"9:900 sleep 1000"}, quiet...))},
			wantCall: true, wantFail: []string{probeNoProgramChanged}, wantReason: []string{"not in the baseline: 9:900 sleep 1000"}},
		{name: "a replaced program fails naming both",
			answers:  []answer{fp(nil, []string{"7:700 sleep 1000"}), fp(nil, []string{"8:800 sleep 1000"})},
			wantCall: true, wantFail: []string{probeNoProgramChanged},
			wantReason: []string{"not in the baseline: 8:800 sleep 1000", "baseline gone: 7:700 sleep 1000"}},
		{name: "a lost final fingerprint fails", answers: []answer{fp(nil, quiet), {err: errMeasure}},
			wantCall: true, wantFail: []string{probeFinalMeasured}, wantReason: []string{"final state could not be measured"}},
		{name: "a failed call fails and is still compared",
			answers: []answer{fp(nil, quiet), fp([]string{"/etc/x"}, quiet)}, callErr: errors.New("tool crashed"),
			wantCall: true, wantFail: []string{probeCallRan, probeNoPathChanged}, wantReason: []string{"tool crashed", "/etc/x"}},
		{name: "a panicking call fails", answers: []answer{fp(nil, quiet), fp(nil, quiet)}, callPanics: true,
			wantCall: true, wantFail: []string{probeCallRan}, wantReason: []string{"panicked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &scriptedSubject{answers: tc.answers}
			called := false
			results, err := AssertNothingLeftBehind(t.Context(), s, func(context.Context) error {
				called = true
				if tc.callPanics {
					panic("boom")
				}
				return tc.callErr
			})
			if called != tc.wantCall {
				t.Fatalf("call ran: %v, want %v", called, tc.wantCall)
			}
			if tc.wantSkip {
				if err != nil || len(results) != 1 || !results[0].Skipped || results[0].Passed {
					t.Fatalf("want one skipped result and no error, got %+v, %v", results, err)
				}
				return
			}
			var failed []string
			for _, r := range results {
				if r.Skipped {
					t.Fatalf("unexpected skip %+v", r)
				}
				if r.Failed() {
					failed = append(failed, r.Name)
				}
			}
			if strings.Join(failed, ",") != strings.Join(tc.wantFail, ",") {
				t.Fatalf("failed probes %v, want %v (results %+v)", failed, tc.wantFail, results)
			}
			if len(tc.wantFail) == 0 {
				if err != nil {
					t.Fatalf("clean run failed: %v", err)
				}
				if len(results) != 5 {
					t.Fatalf("%d results, want 5", len(results))
				}
				return
			}
			var cf *sandbox.ConformanceFailure
			if !errors.As(err, &cf) {
				t.Fatalf("error %v (%T), want a *sandbox.ConformanceFailure", err, err)
			}
			for _, want := range tc.wantReason {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("failure %q does not name %q", err, want)
				}
			}
		})
	}
}

func TestAssertNothingLeftBehindCancelledIsNoVerdict(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := &scriptedSubject{answers: []answer{fp(nil, nil), fp(nil, nil)}}
	results, err := AssertNothingLeftBehind(ctx, s, func(context.Context) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || results != nil {
		t.Fatalf("got %v, %v; want the context's error and no results", results, err)
	}
	var cf *sandbox.ConformanceFailure
	if errors.As(err, &cf) {
		t.Fatalf("a cancelled run gave a verdict: %v", err)
	}
}

func TestAssertNothingLeftBehindRefusesNoSubject(t *testing.T) {
	_, err := AssertNothingLeftBehind(t.Context(), nil, func(context.Context) error { return nil })
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("got %v, want the invalid-argument family", err)
	}
}
