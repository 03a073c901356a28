package actors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/flock"
	"github.com/mafsandbox/engine/sandbox"
)

// Stop gives the fake engine the sleep seam's stop.
func (f *fakeEngine) Stop(_ context.Context, target string, _ time.Duration) error {
	f.log("stop")
	c := f.find(target)
	if c == nil {
		return docker.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c.running, c.paused = false, false
	return nil
}

var _ stopper = (*fakeEngine)(nil)

// lifeActs collects the lifecycle lifeActs a backend reports.
type lifeActs struct {
	sandbox.NopObserver
	ch chan any
}

func newLifeActs() *lifeActs { return &lifeActs{ch: make(chan any, 16)} }

func (o *lifeActs) SandboxPaused(_ context.Context, ev sandbox.SandboxPaused)   { o.ch <- ev }
func (o *lifeActs) SandboxWoken(_ context.Context, ev sandbox.SandboxWoken)     { o.ch <- ev }
func (o *lifeActs) SandboxStopped(_ context.Context, ev sandbox.SandboxStopped) { o.ch <- ev }

func next[T any](t *testing.T, o *lifeActs) T {
	t.Helper()
	select {
	case ev := <-o.ch:
		got, ok := ev.(T)
		if !ok {
			t.Fatalf("act %T %+v, want %T", ev, ev, *new(T))
		}
		return got
	case <-time.After(10 * time.Second):
		t.Fatalf("no %T reported", *new(T))
	}
	panic("unreachable")
}

func noAct(t *testing.T, o *lifeActs) {
	t.Helper()
	select {
	case ev := <-o.ch:
		t.Fatalf("unexpected act %T %+v", ev, ev)
	default:
	}
}

func calledSince(f *fakeEngine, n int, call string) bool { return slices.Contains(f.Calls()[n:], call) }

// An idle sandbox is paused; a stat and a read leave it asleep (no pause or thaw of their
// own), the next exec wakes it before it runs, and each act is reported with its reason.
func TestIdleSandboxSleepsAndAnExecWakesIt(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFakeEngine()
	o := newLifeActs()
	b := newTestBackend(t, f, WithSleep(30*time.Millisecond, 0), WithObserver(o), WithFreezeMarkers(t.TempDir()))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	p := next[sandbox.SandboxPaused](t, o)
	if p.Reason != sandbox.ReasonIdle || p.InstanceID != sb.InstanceID() || p.Key != testKey || p.IdleFor < 30*time.Millisecond {
		t.Fatalf("paused %+v", p)
	}
	if c := f.find(sb.InstanceID()); !c.paused {
		t.Fatal("the container is not paused")
	}
	n := len(f.Calls())
	if _, err := sb.StatFile(ctx, "x", "."); err != nil {
		t.Fatal(err)
	}
	if calledSince(f, n, "pause") || calledSince(f, n, "unpause") || !f.find(sb.InstanceID()).paused {
		t.Fatalf("a stat of a sleeping sandbox froze or woke it: %v", f.Calls()[n:])
	}
	noAct(t, o)
	n = len(f.Calls())
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatal(err)
	}
	if calls := f.Calls()[n:]; len(calls) < 2 || calls[0] != "unpause" || !strings.HasPrefix(calls[1], "exec") {
		t.Fatalf("the exec did not wake the sandbox first: %v", calls)
	}
	w := next[sandbox.SandboxWoken](t, o)
	if w.Reason != sandbox.ReasonCall || w.From != sandbox.WokenFromPaused || !w.ProcessesKept || w.SleptFor <= 0 {
		t.Fatalf("woken %+v", w)
	}
	// It sleeps again once idle again.
	next[sandbox.SandboxPaused](t, o)
	b.Close(ctx)
}

// After the longer idle time the sandbox is stopped: a call on its handle is answered as gone
// (its processes are), the next acquire starts it again and says its processes were not kept.
func TestLongerIdleStopsTheSandbox(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFakeEngine()
	o := newLifeActs()
	b := newTestBackend(t, f, WithSleep(20*time.Millisecond, 60*time.Millisecond), WithObserver(o), WithFreezeMarkers(t.TempDir()))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	next[sandbox.SandboxPaused](t, o)
	s := next[sandbox.SandboxStopped](t, o)
	if s.Reason != sandbox.ReasonIdle || s.IdleFor < 60*time.Millisecond {
		t.Fatalf("stopped %+v", s)
	}
	if st, _, _, ok := b.SleepState(sb.(*Sandbox).ContainerName()); !ok || st != "stopped" {
		t.Fatalf("sleep state %q %v", st, ok)
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("exec on a stopped sandbox = %v, want gone", err)
	}
	again, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if again.(*Sandbox).AcquireOutcome() != sandbox.OutcomeRestarted {
		t.Fatalf("outcome %s", again.(*Sandbox).AcquireOutcome())
	}
	w := next[sandbox.SandboxWoken](t, o)
	if w.From != sandbox.WokenFromStopped || w.ProcessesKept || w.Reason != sandbox.ReasonCall {
		t.Fatalf("woken %+v", w)
	}
	b.Close(ctx)
}

// A spec's own sleep wins over the backend's; zero turns it off.
func TestSpecSleepOverridesTheBackends(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFakeEngine()
	o := newLifeActs()
	b := newTestBackend(t, f, WithSleep(20*time.Millisecond, 0), WithObserver(o), WithFreezeMarkers(t.TempDir()))
	ctx := context.Background()
	if _, err := b.Acquire(ctx, testKey, testSpec(t, sandbox.WithSleep(0, 0))); err != nil {
		t.Fatal(err)
	}
	other := testKey
	other.AgentID = "b"
	if _, err := b.Acquire(ctx, other, testSpec(t, sandbox.WithSleep(40*time.Millisecond, 0))); err != nil {
		t.Fatal(err)
	}
	if p := next[sandbox.SandboxPaused](t, o); p.Key != other || p.IdleFor < 40*time.Millisecond {
		t.Fatalf("paused %+v, want only the second key, after its own time", p)
	}
	time.Sleep(50 * time.Millisecond) // the first key's backend time has long passed
	noAct(t, o)
	b.Close(ctx)
}

// An operator's pause is reported as such; an acquire wakes the sandbox.
func TestPauseOnDemand(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFakeEngine()
	o := newLifeActs()
	b := newTestBackend(t, f, WithObserver(o), WithFreezeMarkers(t.TempDir()))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.(*Sandbox).Pause(sandbox.WithActReason(ctx, sandbox.ReasonOperator)); err != nil {
		t.Fatal(err)
	}
	if p := next[sandbox.SandboxPaused](t, o); p.Reason != sandbox.ReasonOperator {
		t.Fatalf("paused %+v", p)
	}
	if _, err := b.Acquire(ctx, testKey, testSpec(t)); err != nil {
		t.Fatal(err)
	}
	if w := next[sandbox.SandboxWoken](t, o); w.From != sandbox.WokenFromPaused || !w.ProcessesKept {
		t.Fatalf("woken %+v", w)
	}
	if f.find(sb.InstanceID()).paused {
		t.Fatal("still paused after the acquire")
	}
	b.Close(ctx)
}

// A paused container this backend does not remember putting to sleep is told apart by the
// freeze markers: a marker nobody holds is a dead process's freeze (thawed, not reported as a
// wake); a marker another process holds is a live freeze (left paused, the acquire refused);
// no marker is a sleep or someone's pause (woken, reported).
func TestAPausedContainerIsToldApartByItsMarker(t *testing.T) {
	defer goleak.VerifyNone(t)
	cases := []struct {
		name    string
		marker  string // none, dead, live
		woken   bool
		refused bool
	}{
		{"no marker: a sleep", "none", true, false},
		{"dead marker: a freeze left by a crash", "dead", false, false},
		{"live marker: another process's freeze", "live", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine()
			o := newLifeActs()
			dir := t.TempDir()
			b := newTestBackend(t, f, WithObserver(o), WithFreezeMarkers(dir), WithoutEventWatch())
			ctx := context.Background()
			sb, err := b.Acquire(ctx, testKey, testSpec(t))
			if err != nil {
				t.Fatal(err)
			}
			f.find(sb.InstanceID()).paused = true // behind the engine's back
			marker := b.markers.path(markerKey{daemon: "fake-engine", name: sb.(*Sandbox).ContainerName()})
			switch tc.marker {
			case "dead":
				if err := os.WriteFile(marker, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			case "live":
				lk, err := flock.Lock(ctx, marker, true)
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Close()
			}
			_, err = b.Acquire(ctx, testKey, testSpec(t))
			if tc.refused {
				if err == nil || !f.find(sb.InstanceID()).paused {
					t.Fatalf("acquire over a live freeze = %v; it must be refused and left paused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.find(sb.InstanceID()).paused {
				t.Fatal("still paused")
			}
			if tc.woken {
				if w := next[sandbox.SandboxWoken](t, o); w.SleptFor != 0 || w.Key != (sandbox.Key{}) {
					t.Fatalf("woken %+v: an unremembered sleep has no key or time", w)
				}
			} else {
				noAct(t, o)
				if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the dead marker was not cleared: %v", err)
				}
			}
		})
	}
}

// A freeze's marker is held while it is frozen and gone once it is thawed.
func TestFreezeLeavesNoMarker(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := newFakeEngine()
	dir := t.TempDir()
	b := newTestBackend(t, f, WithFreezeMarkers(dir))
	ctx := context.Background()
	sb, err := b.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	var held bool
	f.onPause = func(string) error {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			h, _ := flock.Held(filepath.Join(dir, e.Name()))
			held = held || h
		}
		return nil
	}
	if _, err := sb.StatFile(ctx, "x", "."); err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("no marker was held when the pause was issued")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("markers left after the thaw: %v", entries)
	}
	b.Close(ctx)
}
