package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/reaper"
)

// observerName is a fresh name of the observer's shape.
func observerName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return docker.ObserverNamePrefix + hex.EncodeToString(b)
}

// An observer is created so that the daemon removes it when it exits, on both drivers (the
// CLI's `docker run --rm`, the API's HostConfig.AutoRemove): an engine killed while one runs
// leaves nothing once it exits (issue 29). The observer here is the busybox image sleeping,
// so that it can be inspected while it runs; cancelling the run removes it.
func TestObserverIsAutoRemoved(t *testing.T) {
	noObserverOutlives(t)
	eng := fingerprintEngine(t)
	image := dockertest.Busybox(t)
	target := dockertest.RunContainer(t, image)
	ctx := ctxT(t)
	img, err := eng.InspectImage(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	name := observerName()
	t.Cleanup(func() { _, _, _ = dockertest.DockerErr(context.Background(), "rm", "-f", name) })
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := eng.RunObserver(runCtx, docker.ObserverSpec{Name: name, Image: img.ID, Target: target,
			Args: []string{"sleep", "600"}, Labels: []docker.Label{{Key: label.Role, Value: label.RoleObserver}},
			MaxOutputBytes: 1 << 20, Timeout: 10 * time.Minute})
		done <- err
	}()
	var state string
	for {
		out, _, err := dockertest.DockerErr(ctx, "inspect", "--format", "{{.HostConfig.AutoRemove}} {{.State.Status}}", name)
		if state = strings.TrimSpace(string(out)); err == nil && strings.HasSuffix(state, "running") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the observer ended before it was seen running: %v", err)
		case <-ctx.Done():
			t.Fatalf("the observer was never seen running: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if state != "true running" {
		t.Errorf("observer %s: AutoRemove and state %q, want %q", name, state, "true running")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled run returned %v, want the cancellation", err)
	}
	if _, _, err := dockertest.DockerErr(ctx, "inspect", name); err == nil {
		t.Errorf("observer %s outlived its cancelled run", name)
	}
}

// The reaper takes an observer an engine left behind: an old one, stopped or running, goes;
// a young one stays (it may still be measuring); a container that only looks like one (no
// role label, or another name) is foreign and stays, as is one of another scope.
func TestReapTakesLeftoverObservers(t *testing.T) {
	f := newReapFixture(t)
	observer := f.labels(f.scope, false, label.Role+"="+label.RoleObserver)
	type res struct {
		name, id string
		gone     bool
	}
	var all []*res
	add := func(name, id string, gone bool) { all = append(all, &res{name, id, gone}) }

	add("old stopped observer", f.container(observerName(), false, observer), true)
	add("old running observer", f.container(observerName(), true, observer), true)
	add("old observer name without the role label", f.container(observerName(), false, f.labels(f.scope, false)), false)
	add("old observer of another scope", f.container(observerName(), false,
		f.labels(f.scope+"-other", false, label.Role+"="+label.RoleObserver)), false)
	add("old observer labels under another name", f.container("maf-fingerprint-"+f.scope, false, observer), false)

	time.Sleep(1200 * time.Millisecond)
	mid := time.Now()
	time.Sleep(1200 * time.Millisecond)

	add("young observer", f.container(observerName(), false, observer), false)

	b := newBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := b.Reap(ctx, time.Since(mid), reaper.WithScope(f.scope))
	if err != nil {
		t.Fatalf("reap: %v", err)
	}
	if len(got.Failures) != 0 {
		t.Fatalf("failures %+v", got.Failures)
	}
	if got.ObserversRemoved != 2 || got.Disposed+got.ProxiesRemoved+got.NetworksRemoved != 0 {
		t.Errorf("removed %d observers (and %d, %d, %d), want 2 observers alone",
			got.ObserversRemoved, got.Disposed, got.ProxiesRemoved, got.NetworksRemoved)
	}
	for _, r := range all {
		if exists := f.exists(r.id); exists == r.gone {
			t.Errorf("%s: exists = %v after the sweep", r.name, exists)
		}
	}
}
