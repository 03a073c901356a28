package actors

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

func newTestBackend(t *testing.T, f *fakeEngine, opts ...Option) *Backend {
	t.Helper()
	b, err := NewBackend(docker.Config{}, append([]Option{WithEngine(f)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func testSpec(t *testing.T, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	s, err := sandbox.NewSpec("k", append([]sandbox.SpecOption{sandbox.WithImage("img")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testKey = sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}

func TestNewBackendMakesNoEngineCall(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	if len(b.Declarations().OSFamilies) != 0 {
		t.Fatal("the plain constructor declares no OS family")
	}
	b.Close(context.Background())
	if calls := f.Calls(); len(calls) != 0 {
		t.Fatalf("engine calls: %v", calls)
	}
}

func TestCreateDeclaresTheDaemonsFamily(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name  string
		os    string
		err   error
		posix bool
	}{
		{"linux", "linux", nil, true},
		{"windows", "windows", nil, false},
		{"no answer", "", errors.New("down"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine()
			f.os, f.osErr = tc.os, tc.err
			b, err := Create(context.Background(), docker.Config{}, WithEngine(f))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			if got := b.Declarations().ServesOS(sandbox.OSPosix); got != tc.posix {
				t.Fatalf("posix declared = %v", got)
			}
		})
	}
}

func TestDeclarations(t *testing.T) {
	f := newFakeEngine()
	d := newTestBackend(t, f).Declarations()
	for _, c := range []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete, sandbox.HostTools, sandbox.Reclaim, sandbox.Snapshot} {
		if !d.Capabilities.Has(c) {
			t.Errorf("missing %s", c)
		}
	}
	for _, c := range []sandbox.Capability{sandbox.FilesList, sandbox.RunCode} {
		if d.Capabilities.Has(c) {
			t.Errorf("must withhold %s", c)
		}
	}
	want := sandbox.TransferLimits{MaxBytesPerFile: 64 << 20, MaxTotalBytes: 256 << 20, MaxFiles: 256}
	if d.Limits.FilesIn != want || d.Limits.FilesOut != want {
		t.Errorf("limits = %+v", d.Limits)
	}
	if !d.EgressModes.Has(sandbox.EgressClosed) || d.EgressModes.Has(sandbox.EgressAllowlist) || d.EgressModes.Has(sandbox.EgressUnrestricted) || d.ObservesEgress {
		t.Errorf("closed-only backend declares %v", d.EgressModes.Sorted())
	}
	// Allowlist is declared only once the bound daemon is known to serve it: a proxy image
	// and a Linux daemon whose version chose a topology.
	unbound, err := NewBackend(docker.Config{EgressProxyImage: "proxy"}, WithEngine(f))
	if err != nil {
		t.Fatal(err)
	}
	defer unbound.Close(context.Background())
	if pd := unbound.Declarations(); pd.EgressModes.Has(sandbox.EgressAllowlist) {
		t.Error("an unbound backend offers allowlist before it knows the daemon can serve it")
	}
	withProxy, err := Create(context.Background(), docker.Config{EgressProxyImage: "proxy"}, WithEngine(f), WithoutEventWatch())
	if err != nil {
		t.Fatal(err)
	}
	defer withProxy.Close(context.Background())
	if pd := withProxy.Declarations(); !pd.EgressModes.Has(sandbox.EgressAllowlist) || !pd.ObservesEgress {
		t.Error("a proxy image on a bound Linux daemon adds allowlist")
	}
	other := newFakeEngine()
	other.os = "windows"
	onWindows, err := Create(context.Background(), docker.Config{EgressProxyImage: "proxy"}, WithEngine(other), WithoutEventWatch())
	if err != nil {
		t.Fatal(err)
	}
	defer onWindows.Close(context.Background())
	if pd := onWindows.Declarations(); pd.EgressModes.Has(sandbox.EgressAllowlist) {
		t.Error("a Windows daemon was declared to serve allowlist")
	}
	if newTestBackend(t, f).Isolation() != sandbox.IsolationContainer {
		t.Error("isolation is container, always")
	}
	if d.Resources == nil || *d.Resources != (sandbox.Resources{Pids: 512}) {
		t.Errorf("resources = %+v, want the default pids bound alone", d.Resources)
	}
	if !slices.Equal(d.IsolationScopes, []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall}) {
		t.Errorf("scopes = %v", d.IsolationScopes)
	}
}

// TestDeclarationsWithCapabilitiesAdded: a workload given capabilities back loses deletion,
// reclaim and every scope but one call; the configuration's bounds are what specs may ask.
func TestDeclarationsWithCapabilitiesAdded(t *testing.T) {
	cpus := 2.0
	b, err := NewBackend(docker.Config{CapAdd: []string{"KILL"}, Memory: "1g", CPUs: &cpus, PidsLimit: 100}, WithEngine(newFakeEngine()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	d := b.Declarations()
	if d.Capabilities.Has(sandbox.FilesDelete) || d.Capabilities.Has(sandbox.Reclaim) || !d.Capabilities.Has(sandbox.Exec) {
		t.Errorf("capabilities = %v: files_delete and reclaim withheld, the rest kept", d.Capabilities.Sorted())
	}
	if !slices.Equal(d.IsolationScopes, []sandbox.IsolationScope{sandbox.ScopeCall}) {
		t.Errorf("scopes = %v, want call alone", d.IsolationScopes)
	}
	if want := (sandbox.Resources{MemoryBytes: 1 << 30, CPUs: 2, Pids: 100}); d.Resources == nil || *d.Resources != want {
		t.Errorf("resources = %+v, want %+v", d.Resources, want)
	}
}

// TestAcquireDropsEveryCapabilityAndNarrowsToTheSpec: the workload is created with no
// capability and the spec's resource asks in place of the configuration's.
func TestAcquireDropsEveryCapabilityAndNarrowsToTheSpec(t *testing.T) {
	f := newFakeEngine()
	b, err := NewBackend(docker.Config{Memory: "1g"}, WithEngine(f))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	_, err = b.Acquire(context.Background(), testKey, testSpec(t, sandbox.WithRequires(),
		sandbox.WithResources(sandbox.Resources{MemoryBytes: 256 << 20, Pids: 64})))
	if err != nil {
		t.Fatal(err)
	}
	var got docker.CreateSpec
	for _, c := range f.containers {
		got = c.spec
	}
	if !got.CapDropAll || len(got.CapAdd) != 0 || got.Memory != "268435456" || got.PidsLimit != 64 || got.CPUs != nil {
		t.Fatalf("created with %+v", got)
	}
}

// The cold path prepares the storage base before the container starts, with no freeze; the
// warm path checks it and freezes nothing when it is in place.
func TestAcquireSequencing(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if slices.Contains(calls, "pause") {
		t.Fatalf("a cold acquire froze the container: %v", calls)
	}
	cp, start := slices.Index(calls, "cp-in"), slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "start") })
	if cp < 0 || start < 0 || cp > start {
		t.Fatalf("the base must go in before start: %v", calls)
	}
	if !sb.(*Sandbox).Created() {
		t.Fatal("a created instance says so")
	}
	n := len(f.Calls())
	again, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil || again.InstanceID() != sb.InstanceID() || again.(*Sandbox).Created() {
		t.Fatalf("warm acquire = %v, %v", again, err)
	}
	if warm := f.Calls()[n:]; slices.Contains(warm, "pause") || slices.ContainsFunc(warm, func(c string) bool { return strings.HasPrefix(c, "create") }) {
		t.Fatalf("warm acquire created or froze: %v", warm)
	}
	b.Close(ctx)
}

// A write holds one freeze across its walk and its copy; a panic inside it still thaws, the
// caller gets an error, and the restarted actor serves the next call. A driver panic in a
// prefetch goroutine fails that call instead of the process.
func TestFreezeIsLiftedWhenTheActorFails(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	f.onCopy = func() error {
		once.Do(func() { panic("engine driver bug") })
		return nil
	}
	if err := sb.WriteFile(ctx, "boom", []byte("x"), "."); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("write through a panicking driver = %v", err)
	}
	if c := f.find(sb.InstanceID()); c == nil || c.paused {
		t.Fatal("the container was left frozen")
	}
	if err := sb.WriteFile(ctx, "boom", []byte("x"), "."); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if calls := f.Calls(); !slices.Contains(calls, "stat /maf-sandbox/work/boom") {
		t.Fatalf("the restarted actor lost the storage base: %v", calls[len(calls)-6:])
	}
	f.onStat = func(string, string) (*docker.Entry, error) { panic("stat bug") }
	if _, err := sb.StatFile(ctx, "x", "."); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("stat through a panicking prefetch = %v", err)
	}
	if c := f.find(sb.InstanceID()); c == nil || c.paused {
		t.Fatal("the container was left frozen")
	}
	b.Close(ctx)
}

// execInFlight starts the exec "long" on sb and returns once the fake engine runs it; the exec
// ends when release is closed, its error arriving on done.
func execInFlight(t *testing.T, f *fakeEngine, sb sandbox.Sandbox) (release chan struct{}, done <-chan error) {
	t.Helper()
	release, started := make(chan struct{}), make(chan struct{})
	f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		if req.Argv[0] != "long" {
			return docker.ExecOutput{}, nil // the engine's own commands (a write's rm) run through
		}
		close(started)
		<-release
		return docker.ExecOutput{Stdout: []byte("done")}, nil
	}
	errc := make(chan error, 1)
	go func() {
		_, err := sb.Exec(context.Background(), sandbox.Argv("long"), "/", time.Minute)
		errc <- err
	}()
	<-started
	return release, errc
}

// No freeze begins while an exec is in flight: the file call waits for it.
func TestNoFreezeWhileAnExecRuns(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	ctx := context.Background()
	release, execDone := execInFlight(t, f, sb)
	statDone := make(chan error)
	go func() {
		_, err := sb.StatFile(ctx, "x", "/tmp")
		statDone <- err
	}()
	time.Sleep(50 * time.Millisecond) // give a wrong implementation the chance to freeze
	if slices.Contains(f.Calls(), "pause") {
		t.Fatal("froze while an exec was in flight")
	}
	close(release)
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}
	if err := <-statDone; err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if slices.Index(calls, "pause") < slices.Index(calls, "exec long") {
		t.Fatalf("order: %v", calls)
	}
	b.Close(ctx)
}

// A timed-out exec removes the container and says timeout; a cancelled one does not.
func TestExecTimeoutAndCancel(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	ctx := context.Background()
	f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		<-ctx.Done()
		return docker.ExecOutput{}, ctx.Err()
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := sb.Exec(cctx, sandbox.Argv("x"), "/", time.Minute); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("cancel = %v", err)
	}
	if f.find(sb.InstanceID()) == nil {
		t.Fatal("cancellation removed the sandbox")
	}
	_, err := sb.Exec(ctx, sandbox.Argv("x"), "/", 30*time.Millisecond)
	var te *sandbox.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("timeout = %v", err)
	}
	if f.find(sb.InstanceID()) != nil {
		t.Fatal("a timeout must remove the container")
	}
	b.Close(ctx)
}

func TestRefusedMethods(t *testing.T) {
	f := newFakeEngine()
	b := newTestBackend(t, f)
	sb, err := b.Acquire(context.Background(), testKey, testSpec(t, sandbox.WithRequires()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sb.ListDir(ctx, ".", "."); !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "files_list") {
		t.Errorf("ListDir = %v", err)
	}
	if _, err := sb.RunCode(ctx, "1", time.Second); !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "run_code") {
		t.Errorf("RunCode = %v", err)
	}
	if _, err := b.Acquire(ctx, testKey, sandbox.Spec{}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("zero spec = %v", err)
	}
	noImage, _ := sandbox.NewSpec("k")
	if _, err := b.Acquire(ctx, testKey, noImage); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "neither image nor image_id") {
		t.Errorf("no image = %v", err)
	}
}

// Disposal never freezes, thaws or execs, and a second backend finds containers by label.
func TestDisposeTouchesNothingButRemoval(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	ctx := context.Background()
	if _, err := b.Acquire(ctx, testKey, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	n := len(f.Calls())
	other := newTestBackend(t, f)
	p := other.DisposeScope(ctx, testKey.Scope, testKey.ThreadID)
	if p.Disposed != 1 || p.Undisposed != nil {
		t.Fatalf("purge = %+v", p)
	}
	for _, c := range f.Calls()[n:] {
		if c == "pause" || c == "unpause" || strings.HasPrefix(c, "exec") {
			t.Fatalf("disposal made %q", c)
		}
	}
	if f := b.Dispose(ctx, testKey, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose of a gone container = %v", f)
	}
	b.Close(ctx)
	other.Close(ctx)
}

func TestRetryingClassifier(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{docker.ErrTimeout, true},
		{docker.ErrUnreachable, true},
		{docker.ErrClientNotFound, false},
		{docker.ErrNotFound, false},
		{context.Canceled, false},
	}
	for _, tc := range cases {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v", tc.err, got)
		}
	}
}

// The router's observer is swapped in atomically and hears each window delivered; nil
// switches reporting off, and with it the reads of proxies.
func TestReportTo(t *testing.T) {
	f := newFakeEngine()
	b := newTestBackend(t, f)
	if b.observing() {
		t.Fatal("no observer: proxies must not be read")
	}
	obs := &sink{}
	prev, err := b.ReportTo(obs)
	if err != nil || prev != nil || !b.observing() {
		t.Fatalf("install: previous %t, %v", prev != nil, err)
	}
	b.deliverWindow(context.Background(), sandbox.EgressWindow{Key: testKey, Backend: BackendName, DrainSeconds: 0.5,
		Decisions: []sandbox.EgressDecision{{Decision: sandbox.DecisionDeny, Host: "x", Port: 443}}})
	if got := obs.got(); len(got) != 1 || got[0].Key != testKey || got[0].Backend != BackendName || got[0].DrainSeconds != 0.5 {
		t.Fatalf("reported %+v", got)
	}
	if prev, _ := b.ReportTo(nil); prev != sandbox.Observer(obs) || b.observing() {
		t.Fatal("nil must switch reporting off and return the previous observer")
	}
	var _ sandbox.Reporting = b
}

// starterEngine reports an exec's start before it ends, as the engine does.
type starterEngine struct {
	*fakeEngine
	release chan struct{}
}

func (s starterEngine) ExecWithStart(ctx context.Context, req docker.ExecRequest, started func()) (docker.ExecOutput, error) {
	s.log("exec %s", strings.Join(req.Argv, " "))
	started()
	<-s.release
	return docker.ExecOutput{}, nil
}

// With a driver that says when an exec's process runs, a file call waits only for that:
// the freeze happens while the exec is still running.
func TestFreezeWaitsOnlyForAnExecsStart(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := starterEngine{fakeEngine: newFakeEngine(), release: make(chan struct{})}
	b, err := NewBackend(docker.Config{}, WithEngine(f))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithRequires()))
	if err != nil {
		t.Fatal(err)
	}
	execDone := make(chan error)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Argv("long"), "/", time.Minute)
		execDone <- err
	}()
	for !slices.Contains(f.Calls(), "exec long") {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := sb.StatFile(ctx, "x", "/tmp"); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if !slices.Contains(calls, "pause") || slices.Index(calls, "pause") < slices.Index(calls, "exec long") {
		t.Fatalf("the stat should have frozen while the started exec ran: %v", calls)
	}
	close(f.release)
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}
	b.Close(ctx)
}

// warmRuntimeOnly acquires a runtime-only sandbox on a fake engine, waits for the event watch
// to vouch for it and acquires it once more (the create and start invalidated the cache). It
// returns the engine, the backend and a warm acquire that reports the engine calls it made.
func warmRuntimeOnly(t *testing.T) (*fakeEngine, *Backend, func() []string) {
	t.Helper()
	f := newFakeEngine()
	b := newTestBackend(t, f)
	ctx := context.Background()
	spec := testSpec(t, sandbox.WithRequires())
	acquireWarm := func() []string {
		t.Helper()
		n := len(f.Calls())
		if _, err := b.Acquire(ctx, testKey, spec); err != nil {
			t.Fatal(err)
		}
		return f.Calls()[n:]
	}
	acquireWarm()
	for !b.watch.fresh(b.watch.epochFor(ctx)) { // the stream starts with the first acquire
		time.Sleep(time.Millisecond)
	}
	acquireWarm()
	return f, b, acquireWarm
}

// While the event watch vouches for the last inspect, a warm acquire of a runtime-only spec
// asks the engine nothing.
func TestWarmRuntimeOnlyAcquireMakesNoEngineCall(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	_, b, acquireWarm := warmRuntimeOnly(t)
	for range 5 {
		if calls := acquireWarm(); len(calls) != 0 {
			t.Fatalf("warm runtime-only acquires called the engine: %v", calls)
		}
	}
	b.Close(context.Background())
}

// A broken event stream vouches for nothing it may have missed: the first warm acquire after
// the break inspects again, even once the stream is back, and the ones after it ask nothing.
func TestBrokenEventStreamDropsWhatItVouchedFor(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, acquireWarm := warmRuntimeOnly(t)
	ctx := context.Background()
	if calls := acquireWarm(); len(calls) != 0 {
		t.Fatalf("premise: a vouched-for warm acquire called the engine: %v", calls)
	}
	before := b.watch.epochFor(ctx)
	f.breakEvents()
	// Wait for the stream to be back: what was cached under the old one may have changed
	// while nothing watched, so even now it is not trusted.
	for e := b.watch.epochFor(ctx); e == before || !b.watch.fresh(e); e = b.watch.epochFor(ctx) {
		time.Sleep(time.Millisecond)
	}
	if calls := acquireWarm(); !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "inspect") }) {
		t.Fatalf("the warm acquire after the stream broke trusted its cache: calls %v", calls)
	}
	if calls := acquireWarm(); len(calls) != 0 {
		t.Fatalf("once the stream was back, a warm acquire called the engine: %v", calls)
	}
	b.Close(ctx)
}

// A streaming exec hands each piece of output to emit while the command runs, from the exec's
// goroutine: the fake command cannot end until the test has seen its first chunk. Output the
// driver reads after the call returned (cancelled) never reaches emit.
func TestExecStreaming(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	ctx := context.Background()
	seen, running := make(chan struct{}), make(chan struct{})
	late := make(chan func(), 1)
	f.onExec = func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		if req.Output == nil {
			return docker.ExecOutput{}, errors.New("no output function")
		}
		if req.Argv[0] == "cancelled" {
			close(running)
			<-ctx.Done()
			late <- func() { req.Output(docker.StreamStdout, []byte("late\n")) }
			return docker.ExecOutput{}, ctx.Err()
		}
		req.Output(docker.StreamStdout, []byte("first\n"))
		select {
		case <-seen:
		case <-ctx.Done():
			return docker.ExecOutput{}, ctx.Err()
		}
		req.Output(docker.StreamStderr, []byte("second\n"))
		return docker.ExecOutput{ExitCode: 3, Stdout: []byte("first\n"), Stderr: []byte("second\n")}, nil
	}
	var chunks []string
	res, err := sb.(sandbox.StreamingExec).ExecStreaming(ctx, sandbox.Argv("slow"), "/", time.Minute, 0, func(stream string, p []byte) {
		chunks = append(chunks, stream+":"+string(p))
		if len(chunks) == 1 {
			close(seen)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"stdout:first\n", "stderr:second\n"}; !slices.Equal(chunks, want) {
		t.Fatalf("chunks %q, want %q", chunks, want)
	}
	if res.ExitCode != 3 || res.Stdout() != "first\n" || res.Stderr() != "second\n" {
		t.Fatalf("result %+v", res)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { <-running; cancel() }()
	var after []string
	_, err = sb.(sandbox.StreamingExec).ExecStreaming(cctx, sandbox.Argv("cancelled"), "/", time.Minute, 0, func(stream string, p []byte) {
		after = append(after, stream+":"+string(p))
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	(<-late)() // the driver reads once more after the call returned
	if len(after) != 0 {
		t.Fatalf("emit called after ExecStreaming returned: %q", after)
	}
	b.Close(ctx)
}

// runtimeSandbox is a backend on a fake engine with a runtime-only sandbox acquired: the
// start of most exec and freeze tests. The test closes b itself before goleak checks.
func runtimeSandbox(t *testing.T) (*fakeEngine, *Backend, sandbox.Sandbox) {
	t.Helper()
	f := newFakeEngine()
	b := newTestBackend(t, f)
	sb, err := b.Acquire(context.Background(), testKey, testSpec(t, sandbox.WithRequires()))
	if err != nil {
		t.Fatal(err)
	}
	return f, b, sb
}

// Requests stashed behind an exec survive a restart caused by the first of them: the one that
// panicked gets its error, the next still runs after the restart instead of waiting for the
// ask timeout.
func TestStashSurvivesARestart(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f, b, sb := runtimeSandbox(t)
	ctx := context.Background()
	release, execDone := execInFlight(t, f, sb)
	var once sync.Once
	f.onCopy = func() error {
		once.Do(func() { panic("engine driver bug") })
		return nil
	}
	first, second := make(chan error), make(chan error)
	go func() { first <- sb.WriteFile(ctx, "a", []byte("x"), "/tmp") }()
	time.Sleep(20 * time.Millisecond) // keep the two writes in this order in the stash
	go func() { second <- sb.WriteFile(ctx, "b", []byte("x"), "/tmp") }()
	time.Sleep(20 * time.Millisecond)
	close(release)
	if err := <-execDone; err != nil {
		t.Fatal(err)
	}
	if err := <-first; err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("the panicking write = %v", err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("the write stashed behind it = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write stashed behind the panic was lost in the restart")
	}
	b.Close(ctx)
}

// A pause refused as "already paused" while no freeze of this process is on the container —
// the daemon's state lagging its events — is asked again, briefly, and then succeeds.
func TestFreezeLiftsAStalePausedState(t *testing.T) {
	if calls := statWithPauseAnswers(t, docker.ErrPaused); !strings.Contains(calls, "pause | pause") {
		t.Fatalf("the pause was not asked again: %s", calls)
	}
}

// The same lag after a pause the freezer gave up on: the unpause that lifts the failed attempt
// can leave the daemon's state "paused" for a moment, and the retry rides that out too.
func TestFreezeRetryLiftsAStalePausedState(t *testing.T) {
	if calls := statWithPauseAnswers(t, docker.ErrFreezeFailed, docker.ErrPaused); !strings.Contains(calls, "pause | unpause | pause | pause") {
		t.Fatalf("the retried pause was not asked again: %s", calls)
	}
}

// statWithPauseAnswers stats a file of a fresh sandbox whose first pauses are answered with
// answers, in order, and returns the engine calls made.
func statWithPauseAnswers(t *testing.T, answers ...error) string {
	t.Helper()
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	b := newTestBackend(t, f)
	ctx := context.Background()
	defer b.Close(ctx)
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	f.onPause = func(string) error {
		if len(answers) == 0 {
			return nil
		}
		err := answers[0]
		answers = answers[1:]
		return err
	}
	if _, err := sb.StatFile(ctx, "x", "."); err != nil {
		t.Fatalf("stat: %v", err)
	}
	return strings.Join(f.Calls(), " | ")
}
