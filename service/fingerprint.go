package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Fingerprinter builds the fingerprint subject of a sandbox this engine holds: the Docker
// one is docker/fingerprint's Factory.
type Fingerprinter interface {
	NewSubject(ctx context.Context, sb sandbox.Sandbox) (sandbox.FingerprintSubject, error)
}

// WithFingerprinter answers the fingerprint subject with f (default: the call is refused as
// unsupported). It fails on a nil f.
func WithFingerprinter(f Fingerprinter) Option {
	return func(o *options) error {
		if f == nil {
			return errOption("the fingerprinter is nil")
		}
		o.fingerprints = &fingerprints{f: f, held: map[string]*held{}}
		return nil
	}
}

// maxHeldBaselines bounds the baselines kept for a final fingerprint that has not come yet.
const maxHeldBaselines = 1024

// fingerprints are the subjects whose baseline was taken, by sandbox handle, until their
// final fingerprint.
type fingerprints struct {
	f    Fingerprinter
	mu   sync.Mutex
	held map[string]*held
}

// fingerprintUnsupportedError is an engine that was not given a fingerprinter.
type fingerprintUnsupportedError struct{}

func (fingerprintUnsupportedError) Error() string {
	return "this engine does not fingerprint sandboxes (it was built without a fingerprinter)"
}

func (fingerprintUnsupportedError) Is(target error) bool { return target == sandbox.ErrUnsupported }

// fingerprintWhy says why each phase's failure fails the proof.
var fingerprintWhy = map[string]string{
	"the-baseline-is-pristine":    "a sandbox already changed, or one that cannot be measured, proves nothing about the call",
	"the-final-state-is-measured": "a final state that could not be read is not a clean one",
}

// nothingLeftBehind is the suite name a failed proof is reported under, as the Go probe does.
const nothingLeftBehind = "NOTHING_LEFT_BEHIND"

// fingerprint answers one phase. A refusal or an unreadable measurement comes back as the
// [*sandbox.ConformanceFailure] the Go probe would report, so no failure of the proof reads as
// anything but one.
func fingerprint(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIFingerprintRequest](data)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, h, err := takeFingerprint(ctx, s, req)
	if h != nil {
		s.reportFingerprint(ctx, h, req.Phase, resp, err, start)
	}
	return resp, err
}

// reportFingerprint reports a fingerprint's verdict: skipped, or the final comparison's.
func (s *Service) reportFingerprint(ctx context.Context, h *handle, phase string, resp *messages.APIFingerprintResponse, err error, start time.Time) {
	a := sandbox.FingerprintTaken{Act: sandbox.Act{Key: h.key, Kind: h.kind, InstanceID: h.instanceID(), Took: time.Since(start), Err: err}, Phase: phase}
	if err == nil {
		switch {
		case resp.Skipped:
			a.Verdict = "skipped"
		case resp.Comparison == nil:
		case resp.Passed:
			a.Verdict = "clean"
		default:
			a.Verdict = "changed"
		}
	}
	s.obs.FingerprintTaken(ctx, a)
}

// takeFingerprint answers one phase for the handle it names (nil when none could be named).
func takeFingerprint(ctx context.Context, s *Service, req *messages.APIFingerprintRequest) (*messages.APIFingerprintResponse, *handle, error) {
	fp := s.o.fingerprints
	if fp == nil {
		return nil, nil, fingerprintUnsupportedError{}
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, nil, err
	}
	resp := &messages.APIFingerprintResponse{Phase: req.Phase}
	failed := func(probe string, err error) error {
		return &sandbox.ConformanceFailure{Suite: nothingLeftBehind, Total: 1,
			Failures: []sandbox.ProbeFailure{{Name: probe, Reason: err.Error(), Why: fingerprintWhy[probe]}}}
	}
	switch req.Phase {
	case messages.FingerprintBaseline:
		subject, err := fp.f.NewSubject(ctx, h.sandbox())
		if err != nil {
			return nil, h, failed("the-baseline-is-pristine", err)
		}
		got, err := subject.Fingerprint(ctx)
		if errors.Is(err, sandbox.ErrFingerprintUnsupported) {
			resp.Skipped, resp.Reason = true, err.Error()
			return resp, h, nil
		}
		if err == nil && len(got.ChangedPaths()) > 0 {
			err = fmt.Errorf("the sandbox is not pristine before the call: %v", got.ChangedPaths())
		}
		if err != nil {
			return nil, h, failed("the-baseline-is-pristine", err)
		}
		fp.mu.Lock()
		defer fp.mu.Unlock()
		if _, replacing := fp.held[h.id]; !replacing && len(fp.held) >= maxHeldBaselines {
			return nil, h, &messages.EngineUnavailableError{Subject: "fingerprint", Reason: fmt.Sprintf("the engine holds its limit of %d baselines", maxHeldBaselines)}
		}
		fp.held[h.id] = &held{subject: subject, baseline: got}
		resp.ChangedPaths, resp.RunningPrograms = nonNil(got.ChangedPaths()), nonNil(got.RunningPrograms())
		return resp, h, nil
	case messages.FingerprintFinal:
		fp.mu.Lock()
		b, ok := fp.held[h.id]
		delete(fp.held, h.id)
		fp.mu.Unlock()
		if !ok {
			return nil, h, &messages.BadRequestError{Reason: fmt.Sprintf("sandbox %q has no baseline fingerprint: ask for phase %q first", h.id, messages.FingerprintBaseline)}
		}
		got, err := b.subject.Fingerprint(ctx)
		if err != nil {
			return nil, h, failed("the-final-state-is-measured", err)
		}
		c := sandbox.CompareFingerprints(b.baseline, got)
		resp.ChangedPaths, resp.RunningPrograms = nonNil(got.ChangedPaths()), nonNil(got.RunningPrograms())
		resp.Comparison = &messages.APIFingerprintComparison{PathsAdded: nonNil(c.PathsAdded), PathsRemoved: nonNil(c.PathsRemoved),
			ProgramsAdded: nonNil(c.ProgramsAdded), ProgramsRemoved: nonNil(c.ProgramsRemoved)}
		resp.Passed = c.Clean()
		return resp, h, nil
	}
	return nil, h, &messages.BadRequestError{Reason: fmt.Sprintf("unknown fingerprint phase %q: want %q or %q", req.Phase,
		messages.FingerprintBaseline, messages.FingerprintFinal)}
}

// held is a subject with its baseline.
type held struct {
	subject  sandbox.FingerprintSubject
	baseline sandbox.Fingerprint
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
