package actors

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// lives records what the test hook reports of container actors: how many incarnations of a
// name are live at once (never more than one), and each event, in order.
type lives struct {
	mu      sync.Mutex
	live    map[string]int
	maxLive int
	count   map[actorEvent]int
	events  chan actorEvent
}

func newLives() *lives {
	return &lives{live: map[string]int{}, count: map[actorEvent]int{}, events: make(chan actorEvent, 1<<16)}
}

func (l *lives) hook(name string, ev actorEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev {
	case actorStarted:
		l.live[name]++
		l.maxLive = max(l.maxLive, l.live[name])
	case actorStopped:
		l.live[name]--
	}
	l.count[ev]++
	select {
	case l.events <- ev:
	default:
	}
}

func (l *lives) n(ev actorEvent) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[ev]
}

func (l *lives) most() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxLive
}

// await waits for the next event ev, skipping others.
func (l *lives) await(t *testing.T, ev actorEvent) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-l.events:
			if got == ev {
				return
			}
		case <-deadline:
			t.Fatalf("no actor event %d within 10s", ev)
		}
	}
}

// An idle actor is stopped after the timeout; the next acquire of its name meets a fresh actor
// that inspects again (its predecessor's cache went with it) and reuses the container.
func TestIdleActorIsPassivated(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	l := newLives()
	b := newTestBackend(t, f, WithIdleActorTimeout(50*time.Millisecond), withActorHook(l.hook))
	ctx := context.Background()
	spec := testSpec(t, sandbox.WithRequires())
	first, err := b.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx, testKey, spec); err != nil { // warms the event-vouched cache
		t.Fatal(err)
	}
	l.await(t, actorStopped)
	n := len(f.Calls())
	again, err := b.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	if again.InstanceID() != first.InstanceID() || again.(*Sandbox).Created() {
		t.Fatalf("the container was not reused: %s, created %t", again.InstanceID(), again.(*Sandbox).Created())
	}
	name := first.(*Sandbox).ContainerName()
	if calls := f.Calls()[n:]; !slices.Contains(calls, "inspect "+name) || slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "create") }) {
		t.Fatalf("the fresh actor should inspect and not create: %v", calls)
	}
	if got := l.n(actorStarted); got != 2 {
		t.Fatalf("%d incarnations started, want 2", got)
	}
	b.Close(ctx)
	if l.most() != 1 {
		t.Fatalf("%d actors of one name were live at once", l.most())
	}
}

// A handle whose actor was passivated still works: its call finds no actor, is sent again
// through the supervisor, and the fresh actor serves it with the storage base and identity the
// handle's acquire bound, not the defaults of an empty memory.
func TestHandleOutlivesItsActor(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	l := newLives()
	core, logs := observer.New(zapcore.DebugLevel)
	b := newTestBackend(t, f, WithIdleActorTimeout(30*time.Millisecond), withActorHook(l.hook), WithLogger(zap.New(core)))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithWorkDir("/srv/base")))
	if err != nil {
		t.Fatal(err)
	}
	bound := sb.(*Sandbox).inst().bound
	if bound == nil || bound.workDir != "/srv/base" {
		t.Fatalf("the handle carries no binding: %+v", bound)
	}
	l.await(t, actorStopped)
	var dirs []string
	var mu sync.Mutex
	f.onExec = func(_ context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		mu.Lock()
		dirs = append(dirs, req.WorkDir)
		mu.Unlock()
		return docker.ExecOutput{Stdout: []byte("ok")}, nil
	}
	res, err := sb.Exec(ctx, sandbox.Argv("pwd"), ".", time.Minute)
	if err != nil || res.Stdout() != "ok" {
		t.Fatalf("exec through a handle whose actor stopped = %+v, %v", res, err)
	}
	mu.Lock()
	got := slices.Clone(dirs)
	mu.Unlock()
	if !slices.Equal(got, []string{"/srv/base"}) {
		t.Fatalf("the fresh actor ran in %q, want the handle's base", got)
	}
	if logs.FilterMessageSnippet("resending through the supervisor").Len() == 0 {
		t.Fatal("the call should have found no actor and been resent")
	}
	if l.n(actorStarted) != 2 {
		t.Fatalf("%d incarnations, want 2", l.n(actorStarted))
	}
	b.Close(ctx)
}

// adopt fills an empty memory from a handle's binding, and never overrides an acquire's.
func TestAdoptOnlyIntoAnEmptyMemory(t *testing.T) {
	b := newTestBackend(t, newFakeEngine())
	fa := &facts{uid: 1000, gid: 1000, resolved: true}
	bd := &binding{key: "k", workDir: "/w", facts: fa, factsKey: "id|img|/w"}
	a := newContainerActor(b, "n", &memory{}, &tenure{})
	a.adopt(bd)
	if a.workDir != "/w" || a.facts != fa || a.factsKey != bd.factsKey || a.key != "k" {
		t.Fatalf("not adopted: %+v", a.memory)
	}
	own := newContainerActor(b, "n", &memory{workDir: "/own"}, &tenure{})
	own.adopt(bd)
	if own.workDir != "/own" || own.facts != nil {
		t.Fatalf("an acquire's memory was overridden: %+v", own.memory)
	}
}

// A request that reaches an actor after it stopped is never run and is answered at once with
// a dead letter (protoactor itself would drop it unseen); the handle's next call goes through.
func TestRequestBehindAStopIsDeadLettered(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	l := newLives()
	b := newTestBackend(t, f, withActorHook(l.hook))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	h := sb.(*Sandbox)
	inCopy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onCopy = func() error {
		once.Do(func() { close(inCopy); <-release })
		return nil
	}
	wrote := make(chan error, 1)
	go func() { wrote <- sb.WriteFile(ctx, "a", []byte("x"), ".") }()
	<-inCopy // the actor is busy inside the write's freeze
	// Posted synchronously: it waits in the mailbox behind the write, then the stop overtakes it.
	fut := b.system.Root.RequestFuture(h.pid, h.envelope(&statRequest{InstanceID: h.inst().id, Path: "a", WorkDir: "."}), time.Minute)
	b.system.Root.Stop(h.pid)
	n := len(f.Calls())
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("the write in progress must complete: %v", err)
	}
	if _, err := fut.Result(); !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("the request behind the stop = %v, want a dead letter", err)
	}
	if calls := f.Calls()[n:]; slices.Contains(calls, "pause") {
		t.Fatalf("the dropped stat ran: %v", calls)
	}
	if l.n(requestDropped) != 1 {
		t.Fatalf("%d requests dead-lettered by the stopped actor, want 1", l.n(requestDropped))
	}
	if _, err := sb.StatFile(ctx, "a", "."); err != nil {
		t.Fatalf("the next call through the handle: %v", err)
	}
	if l.n(actorStarted) != 2 {
		t.Fatalf("%d incarnations, want 2", l.n(actorStarted))
	}
	b.Close(ctx)
}

// Nothing is passivated while it holds something: an exec in flight (and the file call
// stashed behind it), or a freeze. Once free, the actor goes.
func TestBusyActorIsNotPassivated(t *testing.T) {
	const idle = 20 * time.Millisecond
	t.Run("exec in flight and a stashed call", func(t *testing.T) {
		defer verifyNoneWithin(t, 3*time.Second)
		f := newFakeEngine()
		l := newLives()
		b := newTestBackend(t, f, WithIdleActorTimeout(idle), withActorHook(l.hook))
		ctx := context.Background()
		sb, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithRequires()))
		if err != nil {
			t.Fatal(err)
		}
		started, release := make(chan struct{}), make(chan struct{})
		f.onExec = func(context.Context, docker.ExecRequest) (docker.ExecOutput, error) {
			close(started)
			<-release
			return docker.ExecOutput{}, nil
		}
		execDone, statDone := make(chan error, 1), make(chan error, 1)
		go func() { _, err := sb.Exec(ctx, sandbox.Argv("long"), "/", time.Minute); execDone <- err }()
		<-started
		go func() { _, err := sb.StatFile(ctx, "x", "/tmp"); statDone <- err }()
		time.Sleep(15 * idle)
		if l.n(actorStopped) != 0 {
			t.Fatal("passivated with an exec in flight")
		}
		close(release)
		if err := <-execDone; err != nil {
			t.Fatal(err)
		}
		if err := <-statDone; err != nil {
			t.Fatal(err)
		}
		l.await(t, actorStopped)
		if l.n(actorStarted) != 1 {
			t.Fatalf("%d incarnations, want 1", l.n(actorStarted))
		}
		b.Close(ctx)
	})
	t.Run("freeze held", func(t *testing.T) {
		defer verifyNoneWithin(t, 3*time.Second)
		f := newFakeEngine()
		l := newLives()
		b := newTestBackend(t, f, WithIdleActorTimeout(idle), withActorHook(l.hook))
		ctx := context.Background()
		sb, err := b.Acquire(ctx, testKey, testSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		inCopy, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		f.onCopy = func() error {
			once.Do(func() { close(inCopy); <-release })
			return nil
		}
		wrote := make(chan error, 1)
		go func() { wrote <- sb.WriteFile(ctx, "a", []byte("x"), ".") }()
		<-inCopy
		time.Sleep(15 * idle)
		if l.n(actorStopped) != 0 {
			t.Fatal("passivated while frozen")
		}
		close(release)
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		l.await(t, actorStopped)
		if c := f.find(sb.InstanceID()); c == nil || c.paused {
			t.Fatal("the container must be left running")
		}
		b.Close(ctx)
	})
	t.Run("quiet", func(t *testing.T) {
		b := newTestBackend(t, newFakeEngine())
		for name, busy := range map[string]func(a *containerActor){
			"exec":     func(a *containerActor) { a.tenure.execs = map[uint64]func(error){1: func(error) {}} },
			"starting": func(a *containerActor) { a.tenure.starting = map[uint64]struct{}{1: {}} },
			"stash":    func(a *containerActor) { a.tenure.stash = []stashed{{}} },
			"freeze":   func(a *containerActor) { a.holding = "id" },
		} {
			a := newContainerActor(b, "n", &memory{}, &tenure{})
			if !a.quiet() {
				t.Fatal("a fresh actor is quiet")
			}
			busy(a)
			if a.quiet() {
				t.Errorf("%s: quiet", name)
			}
		}
	})
}

// A disposal that removed everything stops the actor at once, whatever the idle timeout;
// with passivation off nothing is ever stopped.
func TestDisposalRetiresTheActor(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		stops   bool
	}{{"on", time.Hour, true}, {"off", 0, false}, {"negative", -time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine()
			l := newLives()
			b := newTestBackend(t, f, WithIdleActorTimeout(tc.timeout), withActorHook(l.hook))
			ctx := context.Background()
			if _, err := b.Acquire(ctx, testKey, testSpec(t)); err != nil {
				t.Fatal(err)
			}
			if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{}); failure != nil {
				t.Fatal(failure)
			}
			if tc.stops {
				l.await(t, actorStopped)
			} else {
				time.Sleep(50 * time.Millisecond)
				if l.n(actorStopped) != 0 {
					t.Fatal("stopped with passivation off")
				}
			}
			if _, err := b.Acquire(ctx, testKey, testSpec(t)); err != nil {
				t.Fatal(err)
			}
			b.Close(ctx)
		})
	}
}

// serialEngine fails a test that sees two acquires of one name at once: every acquire
// inspects first (no event watch), inside its actor's mailbox, and the inspect lingers to
// widen the window a second actor of the name would need.
type serialEngine struct {
	*fakeEngine
	mu       sync.Mutex
	inflight map[string]int
	overlaps atomic.Int32
}

func (s *serialEngine) Inspect(ctx context.Context, target string) (docker.ContainerInfo, error) {
	s.mu.Lock()
	s.inflight[target]++
	if s.inflight[target] > 1 {
		s.overlaps.Add(1)
	}
	s.mu.Unlock()
	time.Sleep(50 * time.Microsecond)
	defer func() {
		s.mu.Lock()
		s.inflight[target]--
		s.mu.Unlock()
	}()
	return s.fakeEngine.Inspect(ctx, target)
}

// A storm of calls for one name, old handle and new, races a passivation that fires after
// 300µs of idleness: no call fails, no two actors of the name are ever live at once, no two of its
// acquires overlap, no freeze overlaps another (the fake refuses a second pause), and the
// actor really was passivated and respawned along the way.
func TestPassivationStorm(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := &serialEngine{fakeEngine: newFakeEngine(), inflight: map[string]int{}}
	l := newLives()
	hook := func(name string, ev actorEvent) {
		l.hook(name, ev)
		if ev == actorStopping {
			time.Sleep(200 * time.Microsecond) // widen the window a second actor would need
		}
	}
	b, err := NewBackend(docker.Config{}, WithEngine(f), WithoutEventWatch(), WithIdleActorTimeout(300*time.Microsecond),
		withActorHook(hook), WithAskTimeout(30*time.Second)) // a lost request fails rather than hangs
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := testSpec(t)
	old, err := b.Acquire(ctx, testKey, spec) // a handle kept across every incarnation
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 4, 80
	errs := make(chan error, workers*rounds*4)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				sb, err := b.Acquire(ctx, testKey, spec)
				if err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					continue
				}
				if sb.InstanceID() != old.InstanceID() {
					errs <- fmt.Errorf("acquire made a new instance %s", sb.InstanceID())
				}
				h := sb
				if r%2 == 0 {
					h = old
				}
				p := fmt.Sprintf("f%d-%d", w, r)
				if err := h.WriteFile(ctx, p, []byte("x"), "."); err != nil {
					errs <- fmt.Errorf("write: %w", err)
				}
				if _, err := h.StatFile(ctx, p, "."); err != nil {
					errs <- fmt.Errorf("stat: %w", err)
				}
				if _, err := h.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
					errs <- fmt.Errorf("exec: %w", err)
				}
				// Pauses around the timeout: the actor goes idle often, and calls meet it
				// while its passivation is under way.
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	b.Close(ctx)
	if l.most() != 1 {
		t.Fatalf("%d actors of one name were live at once", l.most())
	}
	if n := f.overlaps.Load(); n != 0 {
		t.Fatalf("%d acquires of one name overlapped", n)
	}
	if l.n(actorStarted) < 2 {
		t.Fatalf("the storm never saw a passivation (%d incarnations)", l.n(actorStarted))
	}
	t.Logf("%d incarnations, %d passivations declined, %d calls held by the supervisor, %d requests dead-lettered by a stopped actor",
		l.n(actorStarted), l.n(passivationDeclined), l.n(callHeld), l.n(requestDropped))
}
