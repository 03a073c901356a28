package client_test

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The families every sandbox error reports; a rebuilt error must answer errors.Is for each
// as the engine's error did.
var families = []error{sandbox.ErrNoBackend, sandbox.ErrRefused, sandbox.ErrUnsupported, sandbox.ErrInvalid,
	sandbox.ErrOS, sandbox.ErrOutput, sandbox.ErrTimeout, sandbox.ErrGone, sandbox.ErrProtocol, messages.ErrUnavailable}

// An error reply comes back as a *messages.RemoteError with the engine's code and text, wrapping
// the same typed error with the same fields, so errors.As and errors.Is answer as on the
// engine. A code this client does not know still keeps its code and text.
func TestErrorRepliesRebuildTheTypedError(t *testing.T) {
	notRegular := &sandbox.NotRegularError{Path: "d"}
	cases := []struct {
		name     string
		sent     error
		wantCode string
		want     error // what the client must find in its error's chain, fields and all
		// as finds it there.
		as func(error) (error, bool)
	}{
		{name: "not confined", sent: &sandbox.NotConfinedError{Path: "../x", WorkDir: "/w", Reason: "escapes"},
			wantCode: messages.CodeNotConfined, as: asType[*sandbox.NotConfinedError]},
		{name: "timeout keeps its duration", sent: &sandbox.TimeoutError{Op: "exec", Timeout: 1500 * time.Millisecond, Discarded: true},
			wantCode: messages.CodeTimeout, as: asType[*sandbox.TimeoutError]},
		{name: "capability denied keeps its set", sent: &sandbox.CapabilityDeniedError{Kind: "k", Denied: []sandbox.Capability{sandbox.Snapshot}},
			wantCode: messages.CodeCapabilityDenied, as: asType[*sandbox.CapabilityDeniedError]},
		{name: "gone", sent: &sandbox.GoneError{InstanceID: "i1", Reason: "removed"},
			wantCode: messages.CodeSandboxGone, as: asType[*sandbox.GoneError]},
		{name: "transfer cap", sent: &sandbox.TransferCapExceededError{Path: "f", Cap: "max bytes", Limit: 1, Actual: 2},
			wantCode: messages.CodeTransferCapExceeded, as: asType[*sandbox.TransferCapExceededError]},
		{name: "bad request keeps its field", sent: &messages.BadRequestError{Reason: "scope is required", Field: "key.scope"},
			wantCode: messages.CodeBadRequest, as: asType[*messages.BadRequestError]},
		{name: "a wrapped typed error", sent: errWrap(notRegular), wantCode: messages.CodeNotRegular, want: notRegular,
			as: asType[*sandbox.NotRegularError]},
		{name: "a sentinel", sent: errWrap(fs.ErrNotExist), wantCode: messages.CodeNotExist, want: fs.ErrNotExist,
			as: isSentinel(fs.ErrNotExist)},
		{name: "a family only", sent: familyOnly{}, wantCode: messages.CodeFamilyRefused, want: sandbox.ErrRefused,
			as: isSentinel(sandbox.ErrRefused)},
		{name: "an unknown error is internal", sent: errors.New("disk on fire"), wantCode: messages.CodeInternal,
			want: &messages.InternalError{Message: "disk on fire"}, as: asType[*messages.InternalError]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				tc.want = tc.sent
			}
			f := newFakeEngine(t)
			c := f.client()
			f.handle(f.shared(messages.SubjectHealthT), failWith(tc.sent))
			_, err := c.Health(ctxT(t))
			var re *messages.RemoteError
			if !errors.As(err, &re) || re.Code != tc.wantCode || err.Error() != tc.sent.Error() {
				t.Fatalf("got %v (%T), want a *messages.RemoteError of code %s and text %q", err, err, tc.wantCode, tc.sent.Error())
			}
			if got, ok := tc.as(err); !ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("found %#v (%v) in the chain, want %#v", got, ok, tc.want)
			}
			for _, fam := range families {
				if errors.Is(err, fam) != errors.Is(tc.sent, fam) {
					t.Fatalf("errors.Is(%v) = %v here, %v on the engine", fam, errors.Is(err, fam), errors.Is(tc.sent, fam))
				}
			}
			if n := len(f.requests(f.shared(messages.SubjectHealthT))); n != 1 {
				t.Fatalf("an error reply was asked %d times, want once", n)
			}
		})
	}
	t.Run("an unknown code", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client()
		f.handle(f.shared(messages.SubjectHealthT), reply(&messages.APIResponse{Error: &messages.APIError{Code: "from_the_future", Message: "new"}}))
		_, err := c.Health(ctxT(t))
		var re *messages.RemoteError
		if !errors.As(err, &re) || re.Code != "from_the_future" || re.Message != "new" || re.Unwrap() != nil {
			t.Fatalf("got %#v, want a *messages.RemoteError that wraps nothing", err)
		}
	})
}

func asType[T error](err error) (error, bool) {
	var v T
	ok := errors.As(err, &v)
	return v, ok
}

func isSentinel(target error) func(error) (error, bool) {
	return func(err error) (error, bool) { return target, errors.Is(err, target) }
}

func errWrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "context: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// familyOnly is an error of a type the code table does not know that reports a family.
type familyOnly struct{}

func (familyOnly) Error() string        { return "refused by policy" }
func (familyOnly) Is(target error) bool { return target == sandbox.ErrRefused }

// A reply that is not JSON, or of another type than the call's, breaks the protocol.
func TestMalformedRepliesBreakTheProtocol(t *testing.T) {
	cases := []struct {
		name  string
		reply handler
	}{
		{name: "not JSON", reply: func(*nats.Msg) any { return []byte("{") }},
		{name: "another type", reply: reply(response(messages.APIAcquireResponseType))},
		{name: "a body that does not decode", reply: func(*nats.Msg) any {
			return []byte(`{"type":"` + messages.APIHealthResponseType + `","in_flight":"many"}`)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			c := f.client()
			f.handle(f.shared(messages.SubjectHealthT), tc.reply)
			_, err := c.Health(ctxT(t))
			var pe *sandbox.ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrProtocol) || pe.Backend != fakeBackend {
				t.Fatalf("got %v (%T), want a *sandbox.ProtocolError", err, err)
			}
		})
	}
}

// An engine that answers it is unavailable (busy, stopping) is asked again until the retry
// wait, then its answer is the call's; an engine that recovers meanwhile serves the call.
func TestBusyEngineIsAskedAgain(t *testing.T) {
	busy := &messages.EngineUnavailableError{Reason: "at its limit"}
	t.Run("until the retry wait", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client(client.WithRetryWait(400 * time.Millisecond))
		f.handle(f.shared(messages.SubjectHealthT), failWith(busy))
		_, err := c.Health(ctxT(t))
		var ue *messages.EngineUnavailableError
		if !errors.Is(err, messages.ErrUnavailable) || !errors.As(err, &ue) || ue.Reason != busy.Reason {
			t.Fatalf("got %v, want the engine's unavailable answer", err)
		}
		if n := len(f.requests(f.shared(messages.SubjectHealthT))); n < 2 {
			t.Fatalf("asked %d times, want retries", n)
		}
	})
	t.Run("until it recovers", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client(client.WithRetryWait(10 * time.Second))
		var n atomic.Int32
		f.handle(f.shared(messages.SubjectHealthT), func(*nats.Msg) any {
			if n.Add(1) <= 2 {
				return &messages.APIResponse{Error: messages.EncodeError(busy)}
			}
			return &messages.APIHealthResponse{APIResponse: messages.APIResponse{Type: messages.APIHealthResponseType}, Status: "ok"}
		})
		h, err := c.Health(ctxT(t))
		if err != nil || h.Status != "ok" || n.Load() != 3 {
			t.Fatalf("health = %+v, %v after %d requests", h, err, n.Load())
		}
	})
	t.Run("not a sandbox call whose engine is gone", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client(client.WithRetryWait(10 * time.Second))
		sb := f.acquired(c) // nobody answers the engine's own subjects
		start := time.Now()
		_, err := sb.StatFile(ctxT(t), "a", ".")
		var ue *messages.EngineUnavailableError
		if !errors.As(err, &ue) || time.Since(start) > 5*time.Second {
			t.Fatalf("stat on a gone engine = %v after %v, want unavailable at once", err, time.Since(start))
		}
	})
}

// An engine that reports it interrupted a call (its lease ended) may have run it: a call
// that is safe to repeat is sent again, any other answers an *OutcomeUnknownError.
func TestInterruptedCalls(t *testing.T) {
	interrupted := &messages.InterruptedError{Reason: "the lease ended"}
	t.Run("an exec is not repeated", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client()
		sb := f.acquired(c)
		f.handle(f.engine(messages.SubjectExecT), failWith(interrupted))
		_, err := sb.Exec(ctxT(t), sandbox.Shell("true"), ".", time.Second)
		var ou *client.OutcomeUnknownError
		var ie *messages.InterruptedError
		if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.As(err, &ou) || !errors.As(err, &ie) || ie.Reason != interrupted.Reason {
			t.Fatalf("got %v (%T), want an *OutcomeUnknownError wrapping the interruption", err, err)
		}
		if ou.Subject != f.engine(messages.SubjectExecT) {
			t.Fatalf("outcome unknown on %q", ou.Subject)
		}
		if n := len(f.requests(f.engine(messages.SubjectExecT))); n != 1 {
			t.Fatalf("an exec was sent %d times", n)
		}
	})
	t.Run("a stat is repeated", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client()
		sb := f.acquired(c)
		var n atomic.Int32
		f.handle(f.engine(messages.SubjectStatFileT), func(*nats.Msg) any {
			if n.Add(1) == 1 {
				return &messages.APIResponse{Error: messages.EncodeError(interrupted)}
			}
			size := int64(3)
			return &messages.APIStatFileResponse{APIResponse: messages.APIResponse{Type: messages.APIStatFileResponseType},
				Stat: &messages.APIFileStat{Path: "a", Kind: string(sandbox.EntryFile), Size: &size}}
		})
		st, err := sb.StatFile(ctxT(t), "a", ".")
		if err != nil || st == nil || *st.Size != 3 || n.Load() != 2 {
			t.Fatalf("stat = %+v, %v after %d requests", st, err, n.Load())
		}
	})
	t.Run("not past the drop retry", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client(client.WithDropRetry(0))
		sb := f.acquired(c)
		f.handle(f.engine(messages.SubjectStatFileT), failWith(interrupted))
		_, err := sb.StatFile(ctxT(t), "a", ".")
		if !errors.Is(err, messages.ErrUnavailable) || errors.Is(err, client.ErrOutcomeUnknown) {
			t.Fatalf("got %v, want unavailable once the drop retry is spent", err)
		}
	})
}

// Without a deadline a call is bounded by the call timeout, and its wait_ms says so.
func TestCallTimeoutBoundsACallWithoutADeadline(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client(client.WithCallTimeout(300 * time.Millisecond))
	f.handle(f.shared(messages.SubjectHealthT), func(*nats.Msg) any { return nil })
	start := time.Now()
	_, err := c.Health(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the call timeout's deadline", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v", waited)
	}
	req := decode[messages.APIHealthRequest](t, f.requests(f.shared(messages.SubjectHealthT))[0])
	if req.WaitMS <= 0 || req.WaitMS > 300 {
		t.Fatalf("wait_ms %d, want at most the 300 ms call timeout", req.WaitMS)
	}
}
