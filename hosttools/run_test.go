package hosttools_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
)

// TestCallRefusals is every refusal of protocol §11.3, each a sentence and never an error,
// with the checks in the spec's order.
func TestCallRefusals(t *testing.T) {
	user := sandbox.IdentityUser
	app := sandbox.IdentityApp
	ret := func(v any) hosttools.Func {
		return func(context.Context, hosttools.Arguments) (any, error) { return v, nil }
	}
	tools := []hosttools.Tool{
		{Name: "ok", Declaration: declared(), Params: []hosttools.Param{{Name: "q", Required: true}}, Func: ret("fine")},
		{Name: "any", Declaration: declared(), AnyArguments: true, Func: ret(1)},
		{Name: "as-user", Declaration: &hosttools.Declaration{Identity: &user}, AnyArguments: true, Func: ret(1)},
		{Name: "fails", Declaration: declared(), AnyArguments: true, Func: func(context.Context, hosttools.Arguments) (any, error) {
			return nil, errors.New("the database at 10.0.0.7 is down")
		}},
		{Name: "panics", Declaration: declared(), AnyArguments: true, Func: func(context.Context, hosttools.Arguments) (any, error) {
			panic("boom")
		}},
		{Name: "nan", Declaration: declared(), AnyArguments: true, Func: ret(math.NaN())},
		{Name: "big", Declaration: declared(), AnyArguments: true, Func: ret(strings.Repeat("x", 200))},
		{Name: "mid", Declaration: declared(), AnyArguments: true, Func: ret(strings.Repeat("x", 40))},
	}
	type call struct{ name, args string }
	cases := []struct {
		name     string
		opts     []hosttools.Option
		before   []call // calls made first, answers ignored
		call     call
		wantCode string
		wantText string
	}{
		{name: "a value is delivered", call: call{`"ok"`, `{"q": 1}`}, wantCode: ""},
		{name: "the cap is exhausted, refusals included", opts: []hosttools.Option{hosttools.WithMaxCallsPerRun(2)},
			before: []call{{`"nope"`, `{}`}, {`"nope"`, `{}`}}, call: call{`"ok"`, `{"q": 1}`}, wantCode: hosttools.RefusedCap, wantText: "cap (2) is exhausted"},
		{name: "the cap comes before the name check", opts: []hosttools.Option{hosttools.WithMaxCallsPerRun(1)},
			before: []call{{`"ok"`, `{"q": 1}`}}, call: call{`7`, `{}`}, wantCode: hosttools.RefusedCap},
		{name: "a name that is not a string", call: call{`["ok"]`, `{}`}, wantCode: hosttools.RefusedName, wantText: "must be a string, not an array"},
		{name: "a missing name", call: call{``, `{}`}, wantCode: hosttools.RefusedName},
		{name: "an unregistered name is echoed", call: call{`"search"`, `{}`}, wantCode: hosttools.RefusedUnknown, wantText: `"search" is not a registered host tool`},
		{name: "a long unregistered name is cut at 120 characters", call: call{`"` + strings.Repeat("n", 300) + `"`, `{}`},
			wantCode: hosttools.RefusedUnknown, wantText: strings.Repeat("n", 120) + " (truncated)"},
		{name: "a user-identity tool", opts: []hosttools.Option{hosttools.WithAllowedIdentities(app, user)},
			call: call{`"as-user"`, `{}`}, wantCode: hosttools.RefusedIdentity, wantText: "user's identity"},
		{name: "arguments that are not an object", call: call{`"ok"`, `[1]`}, wantCode: hosttools.RefusedArguments, wantText: "must be a JSON object"},
		{name: "arguments that are a string", call: call{`"ok"`, `"q=1"`}, wantCode: hosttools.RefusedArguments},
		{name: "the response count is spent before the tool runs",
			opts:   []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 1000, MaxFiles: 1})},
			before: []call{{`"any"`, `{}`}}, call: call{`"ok"`, `[1]`}, wantCode: hosttools.RefusedArguments},
		{name: "the response count is spent",
			opts:   []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 1000, MaxFiles: 1})},
			before: []call{{`"any"`, `{}`}}, call: call{`"ok"`, `{"q": 1}`}, wantCode: hosttools.RefusedBudget, wantText: "delivered-response cap (1)"},
		{name: "the budget comes before binding",
			opts:   []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 1000, MaxFiles: 1})},
			before: []call{{`"any"`, `{}`}}, call: call{`"ok"`, `{"zzz": 1}`}, wantCode: hosttools.RefusedBudget},
		{name: "the byte budget is spent, framing included",
			opts:   []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 2*int64(hosttools.Framing) + 1, MaxFiles: 10})},
			before: []call{{`"any"`, `{}`}}, call: call{`"any"`, `{}`}, wantCode: hosttools.RefusedBudget, wantText: "byte budget"},
		{name: "no response fits the per-response cap",
			opts: []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: int64(hosttools.Framing), MaxTotalBytes: 1000, MaxFiles: 10})},
			call: call{`"any"`, `{}`}, wantCode: hosttools.RefusedBudget, wantText: "per-response cap"},
		{name: "an unexpected keyword", call: call{`"ok"`, `{"q": 1, "extra": 2}`}, wantCode: hosttools.RefusedBinding, wantText: `unexpected keyword argument "extra"`},
		{name: "a missing required argument", call: call{`"ok"`, `{}`}, wantCode: hosttools.RefusedBinding, wantText: `missing a required argument: "q"`},
		{name: "no arguments at all bind as none", call: call{`"ok"`, ``}, wantCode: hosttools.RefusedBinding},
		{name: "a failing tool gets a generic refusal", call: call{`"fails"`, `{}`}, wantCode: hosttools.RefusedFailed, wantText: "the reason is in the host's log"},
		{name: "a panicking tool gets a generic refusal", call: call{`"panics"`, `{}`}, wantCode: hosttools.RefusedFailed},
		{name: "NaN cannot be carried", call: call{`"nan"`, `{}`}, wantCode: hosttools.RefusedNotJSON},
		{name: "a result over the per-response cap",
			opts: []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 1000, MaxFiles: 10})},
			call: call{`"big"`, `{}`}, wantCode: hosttools.RefusedTooLarge, wantText: "per-response cap allows 100"},
		{name: "a result over the remaining total",
			opts:   []hosttools.Option{hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 100, MaxFiles: 10})},
			before: []call{{`"mid"`, `{}`}}, call: call{`"mid"`, `{}`}, wantCode: hosttools.RefusedTooLarge, wantText: "total response cap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := newRun(t, append(tc.opts, hosttools.WithoutRegistrationWarning(), hosttools.WithAllowedIdentities(app, user)), tools...)
			ctx := context.Background()
			for _, c := range tc.before {
				run.CallJSON(ctx, json.RawMessage(c.name), json.RawMessage(c.args))
			}
			a := run.CallJSON(ctx, json.RawMessage(tc.call.name), json.RawMessage(tc.call.args))
			if a.Code != tc.wantCode || !strings.Contains(a.Refusal, tc.wantText) {
				t.Fatalf("answer = %+v, want code %q with %q", a, tc.wantCode, tc.wantText)
			}
			if a.Refused() == (a.Value != nil) {
				t.Fatalf("answer %+v sets both or neither of Value and Refusal", a)
			}
			if strings.Contains(a.Refusal, "10.0.0.7") || strings.Contains(a.Refusal, "boom") {
				t.Fatalf("refusal %q carries the tool's detail", a.Refusal)
			}
			if got := run.Calls(); got != len(tc.before)+1 {
				t.Fatalf("Calls = %d, want %d: every call counts, refusals included", got, len(tc.before)+1)
			}
		})
	}
}

// TestUndeclaredServedWithoutRequireDeclared: without the gate an undeclared tool is served
// (failing safe in the aggregate); the call-time refusal under the gate is in
// run_internal_test.go, since registration already refuses such a tool.
func TestUndeclaredServedWithoutRequireDeclared(t *testing.T) {
	run := newRun(t, nil, hosttools.Tool{Name: "u", AnyArguments: true, Func: func(context.Context, hosttools.Arguments) (any, error) { return 1, nil }})
	if a := run.Call(context.Background(), "u", nil); a.Refused() {
		t.Fatalf("undeclared tool without RequireDeclared: %+v, want a value", a)
	}
}

// TestSlotReturned: a refused delivery gives its response slot back.
func TestSlotReturned(t *testing.T) {
	limits := sandbox.TransferLimits{MaxBytesPerFile: 100, MaxTotalBytes: 1000, MaxFiles: 1}
	n := 0
	run := newRun(t, []hosttools.Option{hosttools.WithResponseLimits(limits)}, hosttools.Tool{Name: "t", Declaration: declared(), AnyArguments: true,
		Func: func(context.Context, hosttools.Arguments) (any, error) {
			n++
			if n == 1 {
				return nil, errors.New("first call fails")
			}
			return "second", nil
		}})
	if a := run.Call(context.Background(), "t", nil); a.Code != hosttools.RefusedFailed {
		t.Fatalf("first = %+v", a)
	}
	if a := run.Call(context.Background(), "t", nil); a.Refused() || string(a.Value) != `"second"` {
		t.Fatalf("second = %+v, want the slot the failure returned", a)
	}
}

// TestHangingToolIsNotCancelled: the caller stops waiting at its deadline, the tool goes on
// with a context the deadline does not cancel.
func TestHangingToolIsNotCancelled(t *testing.T) {
	release := make(chan struct{})
	seen := make(chan error, 1)
	run := newRun(t, nil, hosttools.Tool{Name: "hang", Declaration: declared(), AnyArguments: true,
		Func: func(ctx context.Context, _ hosttools.Arguments) (any, error) {
			<-release
			seen <- ctx.Err()
			return nil, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if a := run.Call(ctx, "hang", nil); a.Code != hosttools.RefusedUnfinished {
		t.Fatalf("answer = %+v, want unfinished", a)
	}
	close(release)
	if err := <-seen; err != nil {
		t.Fatalf("the tool's context was cancelled: %v", err)
	}
}

func TestAnswerFrame(t *testing.T) {
	v := hosttools.Answer{Value: json.RawMessage(`[1,2]`)}
	if got := string(v.Frame()); got != `{"value": [1,2]}` || len(got) != len(`[1,2]`)+hosttools.Framing {
		t.Fatalf("Frame = %q", got)
	}
	r := hosttools.Answer{Refusal: `Error: "x"`, Code: hosttools.RefusedUnknown}
	if got := string(r.Frame()); got != `{"refusal":"Error: \"x\""}` {
		t.Fatalf("Frame = %q", got)
	}
}

type calledEvents struct {
	sandbox.NopObserver
	got []sandbox.HostToolCalled
}

func (o *calledEvents) HostToolCalled(_ context.Context, ev sandbox.HostToolCalled) {
	o.got = append(o.got, ev)
}

type panickingObserver struct{ sandbox.NopObserver }

func (panickingObserver) HostToolCalled(context.Context, sandbox.HostToolCalled) {
	panic("observer bug")
}

// TestRunObserver: every call, refused or not, reaches the observer with its refusal code
// only; a panicking observer changes nothing.
func TestRunObserver(t *testing.T) {
	obs := &calledEvents{}
	key := sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	reg, _ := hosttools.NewRegistry(hosttools.WithoutRegistrationWarning())
	_ = reg.Register(echoTool(nil, nil))
	run := reg.NewRun(hosttools.WithObserver(obs, key, "codeact"), hosttools.WithObserver(panickingObserver{}, key, "codeact"),
		hosttools.WithObserver(nil, key, "codeact"))
	ctx := context.Background()
	if a := run.Call(ctx, "echo", hosttools.Arguments{"x": json.RawMessage(`"hi"`)}); a.Refused() {
		t.Fatalf("echo = %+v", a)
	}
	run.Call(ctx, `a secret "name" at 10.0.0.1`, nil)
	want := []sandbox.HostToolCalled{
		{Act: sandbox.Act{Key: key, Kind: "codeact"}, Tool: "echo", Call: 1, Bytes: len(`"hi"`) + hosttools.Framing},
		{Act: sandbox.Act{Key: key, Kind: "codeact"}, Tool: `a secret "name" at 10.0.0.1`, Call: 2, Refusal: hosttools.RefusedUnknown},
	}
	if len(obs.got) != 2 {
		t.Fatalf("events %+v", obs.got)
	}
	for i := range want {
		obs.got[i].Took = 0
		if obs.got[i] != want[i] {
			t.Fatalf("event %d = %+v, want %+v", i, obs.got[i], want[i])
		}
	}
}
