package lifecycle

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// Twenty concurrent acquires of one key end in one container.
func TestConcurrentAcquiresOfOneKeyMakeOneContainer(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.FilesSpec(t)
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	ids := make([]string, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := b.Acquire(itest.Context(t), key, spec)
			if err != nil {
				t.Errorf("acquire %d: %v", i, err)
				return
			}
			ids[i] = sb.InstanceID()
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("acquires returned different instances: %v", ids)
		}
	}
	out := dockertest.Docker(t, "ps", "-aq", "--filter", "label="+label.Scope+"="+label.Value(key.Scope))
	if n := len(strings.Fields(out)); n != 1 {
		t.Fatalf("%d containers for one key", n)
	}
}

// A container paused behind the engine's back (a host that died inside a file call) is
// thawed by the next acquire; a file call meanwhile says it could not freeze.
func TestContainerPausedBehindTheEnginesBack(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		key := itest.NewKey(t)
		spec := itest.FilesSpec(t)
		sb := itest.Acquire(t, b, key, spec)
		dockertest.Docker(t, "pause", sb.InstanceID())
		t.Cleanup(func() { dockertest.DockerErr(context.Background(), "unpause", sb.InstanceID()) })

		// The archive plane cannot freeze what another froze; the host plane needs no freeze and
		// reads a frozen guest's filesystem as well as a running one's.
		st, err := sb.StatFile(itest.Context(t), "x", ".")
		if strings.Contains(t.Name(), "/host_plane") {
			if err != nil || st != nil {
				t.Fatalf("host-plane stat of a container paused by someone else = %v, %v; want absent", st, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "could not freeze") {
			t.Fatalf("stat of a container paused by someone else = %v, want a freeze refusal", err)
		}
		// The refused exec comes back as the daemon's answer, never re-issued: the pause was not ours.
		res, err := sb.Exec(itest.Context(t), sandbox.Argv("true"), ".", 10*time.Second)
		if err != nil || res.ExitCode == 0 || !strings.Contains(strings.ToLower(res.Stderr()), "paused") {
			t.Fatalf("exec on a foreign-paused container = %+v, %v", res, err)
		}
		again := itest.Acquire(t, b, key, spec)
		if again.InstanceID() != sb.InstanceID() {
			t.Fatal("recovery must keep the container")
		}
		if st := strings.TrimSpace(dockertest.Docker(t, "inspect", "-f", "{{.State.Paused}}", sb.InstanceID())); st != "false" {
			t.Fatalf("still paused after acquire: %s", st)
		}
		itest.Sh(t, again, "true")
	})
}

// A container removed behind the engine's back gives a clear error; the next acquire
// recreates it.
func TestContainerRemovedBehindTheEnginesBack(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.FilesSpec(t)
	sb := itest.Acquire(t, b, key, spec)
	dockertest.Docker(t, "rm", "-f", sb.InstanceID())

	_, err := sb.ReadFile(itest.Context(t), "x", ".", 10)
	if !errors.Is(err, sandbox.ErrGone) || errors.Is(err, sandbox.ErrOS) {
		t.Fatalf("read from a removed container = %v, want the sandbox gone (never absence)", err)
	}
	if st, err := sb.StatFile(itest.Context(t), "x", "."); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("stat of a removed container = %+v, %v; want the sandbox gone (never absent)", st, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		again := itest.Acquire(t, b, key, spec)
		if again.InstanceID() != sb.InstanceID() {
			itest.Sh(t, again, "true")
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("acquire kept handing out the removed instance")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Cancelling a call's context reaps the host-side client only: the sandbox keeps running.
func TestCancelledExecKeepsTheSandbox(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.FilesSpec(t))
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err := sb.Exec(ctx, sandbox.Argv("sleep", "30"), ".", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("err = %v, want the context's own error, not a timeout", err)
	}
	itest.Sh(t, sb, "true")
}

// Execs running while the host stats the sandbox again and again are never refused by the
// engine's own freezes: the actor re-issues what its freeze refused. The stats go over the
// archive file plane, the one that freezes.
func TestExecsInterleavedWithFreezesAreNeverRefused(t *testing.T) {
	b := itest.NewBackend(t, actors.WithFilePlane(actors.FilePlaneArchive))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.FilesSpec(t))
	ctx := itest.Context(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := sb.StatFile(ctx, "x", "."); err != nil {
				t.Errorf("stat: %v", err)
				return
			}
		}
	}()
	for i := range 15 {
		res, err := sb.Exec(ctx, sandbox.Argv("echo", "ok"), ".", 30*time.Second)
		if err != nil || res.ExitCode != 0 || res.Stdout() != "ok\n" {
			t.Errorf("exec %d under freezes = %+v, %v", i, res, err)
		}
	}
	close(stop)
	wg.Wait()
}
