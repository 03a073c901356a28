package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// lifeActs collects the lifecycle lifeActs a backend reports.
type lifeActs struct {
	sandbox.NopObserver
	ch chan any
}

func newLifeActs() *lifeActs { return &lifeActs{ch: make(chan any, 32)} }

func (o *lifeActs) SandboxPaused(_ context.Context, ev sandbox.SandboxPaused)   { o.ch <- ev }
func (o *lifeActs) SandboxWoken(_ context.Context, ev sandbox.SandboxWoken)     { o.ch <- ev }
func (o *lifeActs) SandboxStopped(_ context.Context, ev sandbox.SandboxStopped) { o.ch <- ev }

func nextAct[T any](t *testing.T, o *lifeActs) T {
	t.Helper()
	select {
	case ev := <-o.ch:
		got, ok := ev.(T)
		if !ok {
			t.Fatalf("act %T %+v, want %T", ev, ev, *new(T))
		}
		return got
	case <-time.After(time.Minute):
		t.Fatalf("no %T reported", *new(T))
	}
	panic("unreachable")
}

// state is the container's status, paused flag and init pid as the daemon reports them.
func state(t *testing.T, id string) string {
	t.Helper()
	return strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.State.Status}} paused={{.State.Paused}} pid={{.State.Pid}}", id))
}

// An idle sandbox is paused by the daemon's freezer with its processes kept; a stat and a read
// on either file plane leave it asleep, the next exec wakes it and runs in the same processes.
func TestIdleSandboxPausesAndWakes(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		o := newLifeActs()
		b := itest.NewBackend(t, plane, actors.WithObserver(o))
		key := itest.NewKey(t)
		spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete),
			sandbox.WithSleep(300*time.Millisecond, 0))
		sb := itest.Acquire(t, b, key, spec)
		ctx := itest.Context(t)
		if err := sb.WriteFile(ctx, "note.txt", []byte("kept"), "."); err != nil {
			t.Fatal(err)
		}
		awake := state(t, sb.InstanceID())
		p := nextAct[sandbox.SandboxPaused](t, o)
		if p.Reason != sandbox.ReasonIdle || p.InstanceID != sb.InstanceID() {
			t.Fatalf("paused %+v", p)
		}
		asleep := strings.Replace(awake, "running paused=false", "paused paused=true", 1)
		if got := state(t, sb.InstanceID()); got != asleep {
			t.Fatalf("asleep the container is %q, want %q", got, asleep)
		}
		if st, err := sb.StatFile(ctx, "note.txt", "."); err != nil || st == nil {
			t.Fatalf("stat asleep = %v, %v", st, err)
		}
		if got, err := sb.ReadFile(ctx, "note.txt", ".", 100); err != nil || string(got) != "kept" {
			t.Fatalf("read asleep = %q, %v", got, err)
		}
		if got := state(t, sb.InstanceID()); got != asleep {
			t.Fatalf("a stat and a read changed the sleeping container: %q, want %q", got, asleep)
		}
		res, err := sb.Exec(ctx, sandbox.Argv("cat", "note.txt"), ".", time.Minute)
		if err != nil || res.Stdout() != "kept" {
			t.Fatalf("exec after the sleep = %+v, %v", res, err)
		}
		w := nextAct[sandbox.SandboxWoken](t, o)
		if w.Reason != sandbox.ReasonCall || !w.ProcessesKept || w.From != sandbox.WokenFromPaused {
			t.Fatalf("woken %+v", w)
		}
		if got := state(t, sb.InstanceID()); got != awake {
			t.Fatalf("woken the container is %q, want %q (the same processes)", got, awake)
		}
	})
}

// After the longer idle time the sandbox is stopped: its files are kept, its processes are
// not; a call on its handle is answered as gone, and the next acquire starts it again.
func TestIdleSandboxStopsAndRestarts(t *testing.T) {
	o := newLifeActs()
	b := itest.NewBackend(t, actors.WithObserver(o))
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut), sandbox.WithSleep(200*time.Millisecond, 700*time.Millisecond))
	sb := itest.Acquire(t, b, key, spec)
	ctx := itest.Context(t)
	if err := sb.WriteFile(ctx, "note.txt", []byte("kept"), "."); err != nil {
		t.Fatal(err)
	}
	nextAct[sandbox.SandboxPaused](t, o)
	if s := nextAct[sandbox.SandboxStopped](t, o); s.Reason != sandbox.ReasonIdle {
		t.Fatalf("stopped %+v", s)
	}
	if got := state(t, sb.InstanceID()); !strings.HasPrefix(got, "exited paused=false") {
		t.Fatalf("stopped the container is %q", got)
	}
	if _, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("exec on a stopped sandbox = %v, want gone", err)
	}
	again := itest.Acquire(t, b, key, spec)
	if again.InstanceID() != sb.InstanceID() || again.(*actors.Sandbox).AcquireOutcome() != sandbox.OutcomeRestarted {
		t.Fatalf("the next acquire got %s (%s), want the same instance restarted", again.InstanceID(), again.(*actors.Sandbox).AcquireOutcome())
	}
	w := nextAct[sandbox.SandboxWoken](t, o)
	if w.From != sandbox.WokenFromStopped || w.ProcessesKept {
		t.Fatalf("woken %+v: its processes were not kept", w)
	}
	if got := itest.Sh(t, again, "cat "+actors.DefaultWorkDir+"/note.txt"); got != "kept" {
		t.Fatalf("after the restart the file reads %q", got)
	}
}

// A sandbox asleep when its engine went is recognised by the next engine process as a sleep
// (no freeze marker), not as a freeze a dead host left: woken, and reported as a wake.
func TestSleepOutlivesTheEngine(t *testing.T) {
	o1 := newLifeActs()
	first := itest.NewBackend(t, actors.WithObserver(o1))
	key := itest.NewKey(t)
	sb, err := first.Acquire(itest.Context(t), key, itest.BusyboxSpec(t, sandbox.WithSleep(200*time.Millisecond, 0)))
	if err != nil {
		t.Fatal(err)
	}
	nextAct[sandbox.SandboxPaused](t, o1)
	first.Close(context.Background())
	if got := state(t, sb.InstanceID()); !strings.Contains(got, "paused=true") {
		t.Fatalf("the sandbox is %q after its engine closed, want still asleep", got)
	}
	o2 := newLifeActs()
	second := itest.NewBackend(t, actors.WithObserver(o2))
	again := itest.Acquire(t, second, key, itest.BusyboxSpec(t)) // disposes the key when the test ends
	if again.InstanceID() != sb.InstanceID() {
		t.Fatal("the sleeping instance was replaced")
	}
	if w := nextAct[sandbox.SandboxWoken](t, o2); w.InstanceID != sb.InstanceID() || !w.ProcessesKept || w.SleptFor != 0 {
		t.Fatalf("woken %+v", w)
	}
	itest.Sh(t, again, "true")
}
