package fingerprint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/fingerprint"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// observerName is a fresh name of the observer's shape.
func observerName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return docker.ObserverNamePrefix + hex.EncodeToString(b)
}

// An observer is created so that the daemon removes it when it exits (HostConfig.AutoRemove,
// as `docker run --rm`): an engine killed while one runs leaves nothing once it exits. The observer here is the busybox image sleeping,
// so that it can be inspected while it runs; cancelling the run removes it.
func TestObserverIsAutoRemoved(t *testing.T) {
	noObserverOutlives(t)
	eng := fingerprintEngine(t)
	image := dockertest.Busybox(t)
	target := dockertest.RunContainer(t, image)
	ctx := itest.Context(t)
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
			Args: []string{"sleep", "600"}, Labels: []label.Label{{Key: label.Role, Value: label.RoleObserver}},
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
	dockertest.Require(t)
	scope := "it-reap-" + observerName()[len(docker.ObserverNamePrefix):]
	image := dockertest.Busybox(t)
	labels := func(scope string, extra ...string) []string {
		args := append(dockertest.LabelArgs(), "--label", label.Scope+"="+label.Value(scope), "--label", label.Thread+"=thread",
			"--label", label.Agent+"=agent", "--label", label.Kind+"=shell")
		for _, e := range extra {
			args = append(args, "--label", e)
		}
		return args
	}
	// container creates (running when run is set) a container named name; its removal is
	// registered first.
	container := func(name string, run bool, labelArgs []string) string {
		t.Helper()
		t.Cleanup(func() { _, _, _ = dockertest.DockerErr(context.Background(), "rm", "--force", name) })
		verb := []string{"create"}
		if run {
			verb = []string{"run", "--detach"}
		}
		args := append(append(append(verb, "--pull", "never", "--name", name), labelArgs...), image, "sleep", "3600")
		out := strings.Fields(dockertest.Docker(t, args...))
		return out[len(out)-1]
	}
	exists := func(id string) bool {
		_, _, err := dockertest.DockerErr(context.Background(), "inspect", "--format", "{{.Id}}", id)
		return err == nil
	}
	observer := labels(scope, label.Role+"="+label.RoleObserver)
	type res struct {
		name, id string
		gone     bool
	}
	var all []*res
	add := func(name, id string, gone bool) { all = append(all, &res{name, id, gone}) }

	add("old stopped observer", container(observerName(), false, observer), true)
	add("old running observer", container(observerName(), true, observer), true)
	add("old observer name without the role label", container(observerName(), false, labels(scope)), false)
	add("old observer of another scope", container(observerName(), false, labels(scope+"-other", label.Role+"="+label.RoleObserver)), false)
	add("old observer labels under another name", container("maf-fingerprint-"+scope, false, observer), false)

	time.Sleep(1200 * time.Millisecond)
	mid := time.Now()
	time.Sleep(1200 * time.Millisecond)

	add("young observer", container(observerName(), false, observer), false)

	b := itest.NewBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := b.Reap(ctx, time.Since(mid), reaper.WithScope(scope))
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
		if there := exists(r.id); there == r.gone {
			t.Errorf("%s: exists = %v after the sweep", r.name, there)
		}
	}
}

// The observer kill test's child: the workload's container ID, and the test labels as JSON.
const (
	observerKillChildEnv  = "MAF_SANDBOX_OBSERVER_KILL_CHILD"
	observerKillLabelsEnv = "MAF_SANDBOX_OBSERVER_KILL_LABELS"
)

// An engine SIGKILLed while an observer of its fingerprint runs leaves no observer for good:
// whatever the daemon did not remove itself is gone after one sweep of the workload's scope.
// The engine is this test binary re-run, taking fingerprints of one sandbox in a loop; it is
// killed at a random point after a new observer of that sandbox appeared, three times. A kill
// between the observer's create and start leaves it Created, which no auto-removal covers:
// the sweep is what takes it.
func TestObserverLeftByAKilledEngineIsReaped(t *testing.T) {
	if id := os.Getenv(observerKillChildEnv); id != "" {
		observerKillChild(t, id)
		return
	}
	noObserverOutlives(t)
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(fingerprintWorkload(t)), sandbox.WithWorkDir(fingerprintWorkDir))
	if err != nil {
		t.Fatal(err)
	}
	ctx := itest.Context(t)
	t.Cleanup(func() { _ = b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatal(err)
	}
	labelsJSON, _ := json.Marshal(dockertest.Labels())
	ofScope := []string{"ps", "-a", "-q", "--filter", "label=" + label.Role + "=" + label.RoleObserver,
		"--filter", "label=" + label.Scope + "=" + label.Value(key.Scope)}
	for round := range 3 {
		child := exec.Command(os.Args[0], "-test.run=^TestObserverLeftByAKilledEngineIsReaped$", "-test.count=1")
		child.Env = append(os.Environ(), observerKillChildEnv+"="+sb.InstanceID(), observerKillLabelsEnv+"="+string(labelsJSON))
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		seen := strings.Fields(dockertest.Docker(t, ofScope...)) // what earlier rounds left
		for {
			if now := strings.Fields(dockertest.Docker(t, ofScope...)); slices.ContainsFunc(now, func(id string) bool { return !slices.Contains(seen, id) }) {
				break
			}
			if ctx.Err() != nil {
				_ = child.Process.Kill()
				t.Fatalf("round %d: no observer of the sandbox appeared", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(mrand.IntN(400)) * time.Millisecond)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill the engine: %v", round, err)
		}
		_ = child.Wait()
		t.Logf("round %d: observers of the scope right after the kill: %q", round,
			strings.Fields(dockertest.Docker(t, "ps", "-a", "--format", "{{.Names}}:{{.State}}", "--filter", "label="+label.Scope+"="+label.Value(key.Scope),
				"--filter", "label="+label.Role+"="+label.RoleObserver)))
	}
	// One sweep of the scope with an age every observer exceeds (the sandbox goes too).
	res, err := b.Reap(ctx, time.Nanosecond, reaper.WithScope(key.Scope))
	if err != nil || len(res.Failures) != 0 {
		t.Fatalf("reap: %v, failures %+v", err, res.Failures)
	}
	t.Logf("the sweep removed %d observers", res.ObserversRemoved)
	if left := strings.TrimSpace(dockertest.Docker(t, "ps", "-a", "--format", "{{.Names}}", "--filter", "name=^"+docker.ObserverNamePrefix,
		"--filter", "label="+label.Scope+"="+label.Value(key.Scope))); left != "" {
		t.Fatalf("observers left after the sweep: %s", left)
	}
}

// observerKillChild fingerprints the container id until it is killed.
func observerKillChild(t *testing.T, id string) {
	var labels map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(observerKillLabelsEnv)), &labels); err != nil {
		t.Fatal(err)
	}
	e, err := docker.NewEngine(docker.Config{Labels: labels, CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := fingerprint.New(ctx, e, container{name: id, id: id},
		fingerprint.WithObserverImage(observerImage(t)), fingerprint.WithStorageBase(fingerprintWorkDir))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.Fingerprint(ctx); err != nil {
			t.Logf("fingerprint: %v", err)
		}
	}
}
