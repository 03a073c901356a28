package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// fakeFingerprinter's subjects answer the scripted fingerprints in turn.
type fakeFingerprinter struct{ answers []fpAnswer }

type fpAnswer struct {
	fp  sandbox.Fingerprint
	err error
}

type fakeSubject struct{ answers []fpAnswer }

func (f *fakeFingerprinter) NewSubject(context.Context, sandbox.Sandbox) (sandbox.FingerprintSubject, error) {
	return &fakeSubject{answers: f.answers}, nil
}

func (s *fakeSubject) Fingerprint(context.Context) (sandbox.Fingerprint, error) {
	a := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	return a.fp, a.err
}

// fingerprintPhase asks e for phase of the handle's fingerprint with raw JSON on nc (a
// client's connection, never the engine's), as a host in another language does.
func fingerprintPhase(t *testing.T, nc *nats.Conn, e *engine, handle, phase string) (messages.APIFingerprintResponse, string) {
	t.Helper()
	body := fmt.Sprintf(`{"type":%q,"key":{"scope":%q,"thread_id":%q,"agent_id":%q},"sandbox":%q,"phase":%q}`,
		messages.APIFingerprintRequestType, testKey.Scope, testKey.ThreadID, testKey.AgentID, handle, phase)
	msg, err := nc.Request(messages.Engine(messages.SubjectFingerprintT, messages.DefaultPrefix, e.svc.EngineID()), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	var resp messages.APIFingerprintResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("decode %s: %v", msg.Data, err)
	}
	if resp.Type != messages.APIFingerprintResponseType {
		t.Fatalf("reply type %q", resp.Type)
	}
	code := ""
	if resp.Error != nil {
		code = resp.Error.Code
	}
	return resp, code
}

// acquireHandle acquires with raw JSON and returns the handle.
func acquireHandle(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	body := fmt.Sprintf(`{"type":%q,"key":{"scope":%q,"thread_id":%q,"agent_id":%q},"spec":{"kind":"shell"}}`,
		messages.APIAcquireRequestType, testKey.Scope, testKey.ThreadID, testKey.AgentID)
	msg, err := nc.Request(messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	var resp messages.APIAcquireResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Sandbox == nil {
		t.Fatalf("acquire reply %s: %v", msg.Data, err)
	}
	return resp.Sandbox.ID
}

func TestFingerprintCall(t *testing.T) {
	clean := sandbox.NewFingerprint(nil, []string{"1:1 sleep [sleep infinity]"})
	left := sandbox.NewFingerprint([]string{"/tmp/x"}, []string{"1:1 sleep [sleep infinity]", "9:9 sleep [sleep 1000]"})
	cases := []struct {
		name        string
		answers     []fpAnswer
		wantBase    string // error code of the baseline, "" for none
		wantFinal   string
		wantPassed  bool
		wantSkipped bool
		wantAdded   []string
	}{
		{name: "a clean call passes", answers: []fpAnswer{{fp: clean}, {fp: clean}}, wantPassed: true},
		{name: "residue is compared back", answers: []fpAnswer{{fp: clean}, {fp: left}}, wantAdded: []string{"/tmp/x"}},
		{name: "an unsupported engine is a skip, not a pass",
			answers:     []fpAnswer{{err: fmt.Errorf("%w: the daemon runs windows", sandbox.ErrFingerprintUnsupported)}},
			wantSkipped: true},
		{name: "a refused baseline is a conformance failure",
			answers: []fpAnswer{{err: &refused{}}}, wantBase: messages.CodeConformanceFailure},
		{name: "a dirty baseline is a conformance failure",
			answers: []fpAnswer{{fp: left}}, wantBase: messages.CodeConformanceFailure},
		{name: "a lost final fingerprint is a conformance failure",
			answers: []fpAnswer{{fp: clean}, {err: errors.New("observer output unreadable")}}, wantFinal: messages.CodeConformanceFailure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startEngine(t, newFake(t), service.WithFingerprinter(&fakeFingerprinter{answers: tc.answers}))
			nc := natstest.Connect(t, e.srv)
			h := acquireHandle(t, nc)
			base, code := fingerprintPhase(t, nc, e, h, messages.FingerprintBaseline)
			if code != tc.wantBase {
				t.Fatalf("baseline code %q, want %q (%+v)", code, tc.wantBase, base.Error)
			}
			if base.Passed {
				t.Fatalf("a baseline passed: %+v", base)
			}
			if tc.wantSkipped {
				if !base.Skipped || !strings.Contains(base.Reason, "windows") {
					t.Fatalf("baseline %+v, want a skip with its reason", base)
				}
				return
			}
			if code != "" {
				return
			}
			final, code := fingerprintPhase(t, nc, e, h, messages.FingerprintFinal)
			if code != tc.wantFinal || final.Passed != tc.wantPassed {
				t.Fatalf("final %+v (code %q), want code %q passed %v", final, code, tc.wantFinal, tc.wantPassed)
			}
			if code != "" {
				return
			}
			if fmt.Sprint(final.Comparison.PathsAdded) != fmt.Sprint(nonNilStrings(tc.wantAdded)) {
				t.Fatalf("paths added %q, want %q", final.Comparison.PathsAdded, tc.wantAdded)
			}
			// The baseline is spent: a second final needs a new baseline.
			if _, code := fingerprintPhase(t, nc, e, h, messages.FingerprintFinal); code != messages.CodeBadRequest {
				t.Fatalf("a second final answered %q, want bad_request", code)
			}
		})
	}
}

func TestFingerprintCallRefusals(t *testing.T) {
	e := startEngine(t, newFake(t))
	nc := natstest.Connect(t, e.srv)
	h := acquireHandle(t, nc)
	if _, code := fingerprintPhase(t, nc, e, h, messages.FingerprintBaseline); code != messages.CodeFamilyUnsupported {
		t.Fatalf("an engine without a fingerprinter answered %q, want %q", code, messages.CodeFamilyUnsupported)
	}
	e = startEngine(t, newFake(t), service.WithFingerprinter(&fakeFingerprinter{}))
	nc = natstest.Connect(t, e.srv)
	h = acquireHandle(t, nc)
	if _, code := fingerprintPhase(t, nc, e, h, "sometime"); code != messages.CodeBadRequest {
		t.Fatalf("an unknown phase answered %q, want bad_request", code)
	}
	if _, code := fingerprintPhase(t, nc, e, h, messages.FingerprintFinal); code != messages.CodeBadRequest {
		t.Fatalf("a final without a baseline answered %q, want bad_request", code)
	}
}

type refused struct{}

func (refused) Error() string        { return "fingerprint refused: privileged" }
func (refused) Is(target error) bool { return target == sandbox.ErrRefused }

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestFingerprintBaselinesAreBounded checks that an engine keeps at most 1024 baselines
// waiting for their final, and refuses the next as unavailable.
func TestFingerprintBaselinesAreBounded(t *testing.T) {
	clean := sandbox.NewFingerprint(nil, nil)
	e := startEngine(t, newFake(t), service.WithFingerprinter(&fakeFingerprinter{answers: []fpAnswer{{fp: clean}}}))
	nc := natstest.Connect(t, e.srv)
	for i := range 1025 {
		key := fmt.Sprintf(`{"scope":"s%d","thread_id":"t","agent_id":"a"}`, i)
		msg, err := nc.Request(messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix),
			[]byte(`{"type":"`+messages.APIAcquireRequestType+`","key":`+key+`,"spec":{"kind":"shell"}}`), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var ar messages.APIAcquireResponse
		if err := json.Unmarshal(msg.Data, &ar); err != nil || ar.Sandbox == nil {
			t.Fatalf("acquire %d: %s", i, msg.Data)
		}
		msg, err = nc.Request(messages.Engine(messages.SubjectFingerprintT, messages.DefaultPrefix, e.svc.EngineID()),
			[]byte(`{"type":"`+messages.APIFingerprintRequestType+`","key":`+key+`,"sandbox":"`+ar.Sandbox.ID+`","phase":"baseline"}`), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var fr messages.APIFingerprintResponse
		if err := json.Unmarshal(msg.Data, &fr); err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 1024 && fr.Error != nil:
			t.Fatalf("baseline %d refused: %+v", i, fr.Error)
		case i == 1024 && (fr.Error == nil || fr.Error.Code != messages.CodeEngineUnavailable):
			t.Fatalf("baseline 1025 answered %+v, want engine_unavailable", fr.Error)
		}
	}
}
