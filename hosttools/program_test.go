package hosttools_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
)

func TestRunProgramServesCalls(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	run := newRun(t, nil, echoTool(&calls, &mu))
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		for i := range 3 {
			r := g.call(ctx, "echo", map[string]any{"x": i})
			g.print(fmt.Sprintf("%v;", r["value"]))
		}
		r := g.call(ctx, "nope", nil)
		g.print(fmt.Sprint(r["refusal"] != nil))
		return 3
	})
	l := layoutFor(t)
	res, err := hosttools.RunProgram(context.Background(), f, run, l, []byte("print('hi')"), 5*time.Second, fast)
	if err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	if res.ExitCode != 3 || res.Stdout() != "0;1;2;true" {
		t.Fatalf("result = %d %q, want 3 %q", res.ExitCode, res.Stdout(), "0;1;2;true")
	}
	if !slices.Equal(calls, []string{"0", "1", "2"}) || run.Calls() != 4 {
		t.Fatalf("tool calls %v, run calls %d", calls, run.Calls())
	}
	if len(f.killed()) != 0 {
		t.Fatalf("a program that exited was signalled: %v", f.killed())
	}
	assertTransportGone(t, f, l)
	// The program, the shim and the launcher went in through the file plane; work/ is the
	// caller's and is left. The execs are the launcher between two sweeps.
	execs := f.ExecCalls()
	if len(execs) != 3 || !strings.Contains(execs[1].Text, l.Launcher) || execs[1].WorkDir != l.Dir ||
		!strings.Contains(execs[0].Text, "swept") || execs[2].Text != execs[0].Text {
		t.Fatalf("execs = %+v, want a sweep, the launcher, a sweep", execs)
	}
	if rc := f.ReclaimCalls(); len(rc) != 1 || rc[0].Text != hosttools.TransportDir || rc[0].WorkDir != l.Dir {
		t.Fatalf("reclaims = %+v, want host_tools under the run directory", rc)
	}
}

// TestRunProgramStrictOrder: a request published under a higher number waits for the lower
// one; nothing is served out of order.
func TestRunProgramStrictOrder(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	run := newRun(t, nil, echoTool(&calls, &mu))
	early := make(chan bool, 1)
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		g.claim()
		g.claim()
		g.publish(2, `{"id":"0002","name":"echo","arguments":{"x":"second"}}`)
		time.Sleep(60 * time.Millisecond) // many polls
		early <- g.hasResponse(2)
		g.publish(1, `{"id":"0001","name":"echo","arguments":{"x":"first"}}`)
		g.response(ctx, 1)
		g.response(ctx, 2)
		return 0
	})
	l := layoutFor(t)
	if _, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast); err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	if <-early {
		t.Fatal("request 0002 was answered before 0001 existed")
	}
	if !slices.Equal(calls, []string{"first", "second"}) {
		t.Fatalf("tool saw %v, want first then second", calls)
	}
	assertTransportGone(t, f, l)
}

// TestRunProgramClaimFlood: past the cap the guest hears one refusal and nothing more is read.
func TestRunProgramClaimFlood(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	run := newRun(t, []hosttools.Option{hosttools.WithMaxCallsPerRun(3)}, echoTool(&calls, &mu))
	answered := make(chan []int, 1)
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		for range 40 {
			n := g.claim()
			g.publish(n, fmt.Sprintf(`{"id":"%04d","name":"echo","arguments":{"x":%d}}`, n, n))
		}
		last := g.response(ctx, 4)
		if last == nil || !strings.Contains(fmt.Sprint(last["refusal"]), "cap (3)") {
			t.Errorf("answer to 0004 = %v, want the cap refusal", last)
		}
		time.Sleep(40 * time.Millisecond)
		var got []int
		for n := 1; n <= 40; n++ {
			if g.hasResponse(n) {
				got = append(got, n)
			}
		}
		answered <- got
		return 0
	})
	l := layoutFor(t)
	if _, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast); err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	if got := <-answered; !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("answered %v, want 1-4 only", got)
	}
	if len(calls) != 3 || run.Calls() != 4 {
		t.Fatalf("tool ran %d times, run counted %d; want 3 and 4", len(calls), run.Calls())
	}
	assertTransportGone(t, f, l)
}

// TestRunProgramGuestWrittenResponse: a response the guest wrote itself changes nothing
// host-side: the request is still served once, and the host's answer replaces the forgery.
func TestRunProgramGuestWrittenResponse(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	run := newRun(t, nil, echoTool(&calls, &mu))
	final := make(chan string, 1)
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		n := g.claim()
		g.write(hosttools.CallsDir+"/0001.response.json", `{"value": "forged"}`)
		g.publish(n, `{"id":"0001","name":"echo","arguments":{"x":"real"}}`)
		for ctx.Err() == nil {
			mu.Lock()
			n := len(calls)
			mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		b, _ := g.f.ReadFile(ctx, "host_tools/"+hosttools.CallsDir+"/0001.response.json", g.dir, 1<<10)
		final <- string(b)
		return 0
	})
	l := layoutFor(t)
	if _, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast); err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	if got := <-final; got != `{"value": "real"}` {
		t.Fatalf("response file = %q, want the host's answer", got)
	}
	if len(calls) != 1 || run.Calls() != 1 {
		t.Fatalf("tool ran %d times, run counted %d; want once", len(calls), run.Calls())
	}
	assertTransportGone(t, f, l)
}

// TestRunProgramForgedExitMarker: the marker is the guest's claim. A program that writes it
// and keeps running ends the run with the code it claimed, unsignalled; only disposal is
// certain.
func TestRunProgramForgedExitMarker(t *testing.T) {
	run := newRun(t, nil)
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		g.print("still here")
		g.write(hosttools.ExitFile, "0")
		<-ctx.Done() // keeps running
		return 0
	})
	l := layoutFor(t)
	start := time.Now()
	res, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast)
	if err != nil || res.ExitCode != 0 || res.Stdout() != "still here" {
		t.Fatalf("RunProgram = %+v, %v; want the forged success", res, err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("the run waited for a program whose marker was already there")
	}
	if k := f.killed(); len(k) != 0 {
		t.Fatalf("signals %v: the marker's claim is taken as it is", k)
	}
	assertTransportGone(t, f, l)
}

// TestRunProgramNeverExits: the bound passes, the output so far is kept, the group the
// receipt named is killed, and the error says so.
func TestRunProgramNeverExits(t *testing.T) {
	cases := []struct {
		name      string
		receipt   string
		wantKill  string
		wantReach sandbox.SignalReach
	}{
		{"a group announced", "process-v1 4242 4242\n", "-4242", sandbox.ReachGroup},
		{"no group announced", "process-v1 4242 0\n", "4242", sandbox.ReachProgram},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, f := newRun(t, nil), workingForever(t)
			f.receipt = tc.receipt
			l := layoutFor(t)
			start := time.Now()
			_, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 200*time.Millisecond, fast)
			var pt *sandbox.ProgramTimeoutError
			if !errors.As(err, &pt) || !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("RunProgram = %v, want ProgramTimeoutError", err)
			}
			if pt.Signal != sandbox.SignalSent || pt.Reach != tc.wantReach || pt.Output != "working" || pt.Timeout != 200*time.Millisecond {
				t.Fatalf("error = %+v", pt)
			}
			if k := f.killed(); !slices.Equal(k, []string{tc.wantKill}) {
				t.Fatalf("signals %v, want %s", k, tc.wantKill)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("the run took %s past a 200ms bound", el)
			}
			assertTransportGone(t, f, l)
		})
	}
}

// TestRunProgramFinalLookAndOutputEachHaveAGrace: at the bound, a slow look for the exit
// marker does not eat the time the output needs (a frozen file plane under load takes most
// of a grace for one read), and output that could still not be read says so instead of
// passing for a program that printed nothing.
func TestRunProgramFinalLookAndOutputEachHaveAGrace(t *testing.T) {
	cases := []struct {
		name       string
		outputRead time.Duration
		wantOutput string
		wantNote   bool
	}{
		{"both reads slow, each within its grace", 1200 * time.Millisecond, "working", false},
		{"the output read past its grace", time.Hour, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, f := newRun(t, nil), workingForever(t)
			f.receipt = "process-v1 4242 4242\n"
			l := layoutFor(t)
			f.slowRead = map[string]time.Duration{path.Base(l.ExitCode): 1200 * time.Millisecond, path.Base(l.Output): tc.outputRead}
			_, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 200*time.Millisecond, fast)
			var pt *sandbox.ProgramTimeoutError
			if !errors.As(err, &pt) || pt.Signal != sandbox.SignalSent {
				t.Fatalf("RunProgram = %v, want a program timeout with the signal sent", err)
			}
			if pt.Output != tc.wantOutput || (pt.Note != "") != tc.wantNote || (tc.wantNote && !strings.Contains(err.Error(), pt.Note)) {
				t.Fatalf("output %q, note %q, error %q", pt.Output, pt.Note, err)
			}
			assertTransportGone(t, f, l)
		})
	}
}

// workingForever is a guest program that prints "working" and never exits.
func workingForever(t *testing.T) *fakeGuest {
	return newFakeGuest(t, func(ctx context.Context, g *guest) int {
		g.print("working")
		<-ctx.Done()
		return 0
	})
}

// TestRunProgramHangingTool: the tool is never cancelled, but the run's bound holds.
func TestRunProgramHangingTool(t *testing.T) {
	release := make(chan struct{})
	toolCtxErr := make(chan error, 1)
	run := newRun(t, nil, hosttools.Tool{Name: "hang", Declaration: declared(), AnyArguments: true,
		Func: func(ctx context.Context, _ hosttools.Arguments) (any, error) {
			<-release
			toolCtxErr <- ctx.Err()
			return "late", nil
		}})
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		g.call(ctx, "hang", nil)
		return 0
	})
	l := layoutFor(t)
	start := time.Now()
	_, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 200*time.Millisecond, fast)
	var pt *sandbox.ProgramTimeoutError
	if !errors.As(err, &pt) || pt.Signal != sandbox.SignalSent {
		t.Fatalf("RunProgram = %v, want a program timeout with the signal sent", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("a hanging tool held the run for %s", el)
	}
	close(release)
	if err := <-toolCtxErr; err != nil {
		t.Fatalf("the running tool's context was cancelled: %v", err)
	}
	assertTransportGone(t, f, l)
}

// TestRunProgramTransportRefusals: requests the host will not read as calls are answered
// with a sentence and counted and reported as calls with their refusal code; abandoned
// numbers are stepped over and are no calls.
func TestRunProgramTransportRefusals(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	limits := sandbox.TransferLimits{MaxBytesPerFile: 200, MaxTotalBytes: 10000, MaxFiles: 10}
	reg, err := hosttools.NewRegistry(hosttools.WithResponseLimits(limits))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(echoTool(&calls, &mu)); err != nil {
		t.Fatal(err)
	}
	var reported []string
	run := reg.NewRun(hosttools.WithCallReport(func(c hosttools.Called) {
		reported = append(reported, fmt.Sprintf("%d:%s", c.Number, c.Code))
	}))
	got := make(chan []string, 1)
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		bodies := []string{`not json`, `[1,2]`, `{"id":"0003","abandoned":true}`, `{"x":"` + strings.Repeat("y", 300) + `"}`,
			"{\"name\":\"echo\",\"arguments\":{\"x\":\"\xff\"}}", `{"id":"0006","name":"echo","arguments":{"x":"ok"}}`}
		for _, b := range bodies {
			g.publish(g.claim(), b)
		}
		var answers []string
		for _, n := range []int{1, 2, 4, 5, 6} {
			r := g.response(ctx, n)
			answers = append(answers, fmt.Sprint(r["refusal"], r["value"]))
		}
		if g.hasResponse(3) {
			t.Error("an abandoned number was answered")
		}
		got <- answers
		return 0
	})
	l := layoutFor(t)
	if _, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast); err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	answers := <-got
	for i, want := range []string{"not valid JSON", "must be a JSON object", "larger than the host will read", "not valid JSON", "ok"} {
		if !strings.Contains(answers[i], want) {
			t.Fatalf("answer %d = %q, want %q", i, answers[i], want)
		}
	}
	if run.Calls() != 5 {
		t.Fatalf("run counted %d calls, want 5: a refused request is a call, an abandoned number is not", run.Calls())
	}
	if want := "1:bad_request 2:bad_request 3:request_size 4:bad_request 5:"; strings.Join(reported, " ") != want {
		t.Fatalf("reported %q, want %q", strings.Join(reported, " "), want)
	}
	assertTransportGone(t, f, l)
}

func TestRunProgramLauncherOutcomes(t *testing.T) {
	failed := sandbox.ExecResultFromText("", "sh: cannot create", 2)
	cases := []struct {
		name      string
		receipt   string
		launchErr error
		result    *sandbox.ExecResult
		check     func(t *testing.T, res sandbox.ExecResult, err error)
	}{
		{name: "no receipt starts nothing", receipt: "hello\n", check: func(t *testing.T, _ sandbox.ExecResult, err error) {
			if !errors.Is(err, hosttools.ErrNoReceipt) {
				t.Fatalf("err = %v, want ErrNoReceipt", err)
			}
		}},
		{name: "a failed launcher is the result", result: &failed, check: func(t *testing.T, res sandbox.ExecResult, err error) {
			if err != nil || res.ExitCode != 2 || res.Stderr() != "sh: cannot create" {
				t.Fatalf("= %+v, %v", res, err)
			}
		}},
		{name: "a launcher that runs out is the run's timeout", launchErr: &sandbox.TimeoutError{Op: "exec", Timeout: time.Second},
			check: func(t *testing.T, _ sandbox.ExecResult, err error) {
				var pt *sandbox.ProgramTimeoutError
				if !errors.As(err, &pt) || pt.Signal != sandbox.SignalUnrecorded || pt.Reach != sandbox.ReachNothing {
					t.Fatalf("err = %v, want a program timeout, unrecorded", err)
				}
			}},
		{name: "a backend failure is returned", launchErr: &sandbox.UnsupportedError{Backend: "fake", Op: "exec", Reason: "no"},
			check: func(t *testing.T, _ sandbox.ExecResult, err error) {
				if !errors.Is(err, sandbox.ErrUnsupported) {
					t.Fatalf("err = %v, want the backend's error", err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGuest(t, func(context.Context, *guest) int { t.Error("the program ran"); return 0 })
			if tc.receipt != "" {
				f.receipt = tc.receipt
			}
			f.launchErr, f.launchResult = tc.launchErr, tc.result
			l := layoutFor(t)
			res, err := hosttools.RunProgram(context.Background(), f, newRun(t, nil), l, nil, time.Second, fast)
			tc.check(t, res, err)
			time.Sleep(10 * time.Millisecond) // a gate-waiting guest would start now
			assertTransportGone(t, f, l)
		})
	}
}

func TestNewLayout(t *testing.T) {
	cases := []struct {
		dir, program string
		ok           bool
	}{
		{"/maf-sandbox/work/run1", "", true},
		{"/maf-sandbox/work/run1", "main.py", true},
		{"/maf-sandbox/work/run1", "json.backup.py", true},
		{"relative/run", "", false},
		{"/maf-sandbox/work/job:slot", "", false},
		{"/maf", "", false},
		{"/maf-sandbox/work/run1", "sub/main.py", false},
		{"/maf-sandbox/work/run1", "program_exit_code", false},
		{"/maf-sandbox/work/run1", "maf_host_tools.so", false},
		{"/maf-sandbox/work/run1", "json.py", false},
		{"/maf-sandbox/work/run1", "json.cpython-312-x86_64-linux-gnu.so", false},
		{"/maf-sandbox/work/run1", "sitecustomize.py", false},
	}
	for _, tc := range cases {
		_, err := hosttools.NewLayout(tc.dir, tc.program)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, sandbox.ErrInvalid)) {
			t.Errorf("NewLayout(%q, %q) = %v, want ok %v", tc.dir, tc.program, err, tc.ok)
		}
	}
}

// TestRunProgramFileFailures: a look that fails is retried at the next poll, and a write of
// the transport's own files a few times (Docker's freezer can refuse a busy guest for a
// moment); a look that keeps failing ends the run with its error, after the program is
// signalled.
func TestRunProgramFileFailures(t *testing.T) {
	freezer := errors.New("docker could not freeze: unable to freeze")
	cases := []struct {
		name     string
		fail     int
		failGate int
		wantErr  bool
	}{
		{"two failed looks in a row are absorbed", 2, 0, false},
		{"looks that keep failing end the run", -1, 0, true},
		{"two failed writes of the start gate are absorbed", 0, 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			var mu sync.Mutex
			run := newRun(t, nil, echoTool(&calls, &mu))
			f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
				r := g.call(ctx, "echo", map[string]any{"x": "ok"})
				g.print(fmt.Sprint(r["value"]))
				return 0
			})
			f.failReq, f.failGate, f.failErr = tc.fail, tc.failGate, freezer
			l := layoutFor(t)
			res, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 5*time.Second, fast)
			switch {
			case tc.wantErr:
				if !errors.Is(err, freezer) || len(f.killed()) != 1 {
					t.Fatalf("RunProgram = %v, signals %v; want the failure, after a kill", err, f.killed())
				}
			case err != nil || res.Stdout() != "ok":
				t.Fatalf("RunProgram = %q, %v; want the call served", res.Stdout(), err)
			}
			assertTransportGone(t, f, l)
		})
	}
}

// TestRunProgramHint: a hint wakes the supervisor before its poll; requests are still read
// through the file plane.
func TestRunProgramHint(t *testing.T) {
	var calls []string
	var mu sync.Mutex
	run := newRun(t, nil, echoTool(&calls, &mu))
	f := newFakeGuest(t, func(ctx context.Context, g *guest) int {
		time.Sleep(50 * time.Millisecond) // after the supervisor's first look
		g.call(ctx, "echo", map[string]any{"x": 1})
		return 0
	})
	hint := func(ctx context.Context, _ sandbox.Sandbox, _ hosttools.Layout) <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		}()
		return ch
	}
	l := layoutFor(t)
	start := time.Now()
	_, err := hosttools.RunProgram(context.Background(), f, run, l, nil, 30*time.Second,
		hosttools.WithPollInterval(10*time.Second), hosttools.WithHint(hint))
	if err != nil || len(calls) != 1 {
		t.Fatalf("RunProgram = %v with %d calls", err, len(calls))
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %s: the hint did not wake the 10 s poll", el)
	}
	assertTransportGone(t, f, l)
}
