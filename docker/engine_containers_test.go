package docker_test

// The container lifecycle: binding, the daemon, images, run and inspect, absence, removal,
// start, pause.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

func TestEngineBind(t *testing.T) {
	e := newEngine(t)
	b, err := e.Bind(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if b.Context == "" || b.Endpoint == "" {
		t.Fatalf("binding %+v", b)
	}
	if again, err := e.Bind(testCtx(t)); err != nil || again != b {
		t.Fatalf("second Bind = %+v, %v; want %+v", again, err, b)
	}
}

func TestEngineServerOS(t *testing.T) {
	os, err := newEngine(t).ServerOS(testCtx(t))
	if err != nil || os != "linux" {
		t.Fatalf("ServerOS = %q, %v", os, err)
	}
}

func TestEngineImageExists(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	cases := []struct {
		name  string
		image string
		want  bool
	}{
		{"present", image, true},
		{"absent", "maf-sandbox-test/absent:none", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.ImageExists(testCtx(t), tc.image)
			if err != nil || got != tc.want {
				t.Fatalf("ImageExists(%s) = %v, %v; want %v", tc.image, got, err, tc.want)
			}
		})
	}
}

// TestEngineRunInspect runs a workload and holds the inspect to it: who it is, the labels it
// carries and the hardening it runs under.
func TestEngineRunInspect(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	key := testKey(t)
	before := time.Now().Add(-time.Minute)
	name, id := workload(t, e, image, key) // the configuration's defaults drop every capability
	info, err := e.Inspect(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != id || info.Name != name || !info.Running || info.Paused || info.Status != "running" {
		t.Fatalf("inspect %+v", info)
	}
	wantWorkloadLabels(t, info, key)
	wantHardened(t, info, before)
	wantProvable(t, e, info)
	byID, err := e.Inspect(testCtx(t), id)
	if err != nil || byID.Name != name {
		t.Fatalf("inspect by ID = %+v, %v", byID, err)
	}
}

// wantWorkloadLabels fails t unless info carries the workload's own labels for key and the
// engine's configured labels, which are what a test's sweep finds it by.
func wantWorkloadLabels(t *testing.T, info docker.ContainerInfo, key sandbox.Key) {
	t.Helper()
	if info.Labels[label.Scope] != label.Value(key.Scope) || info.Labels[label.WorkDir] != "/maf-sandbox/work" ||
		info.Labels[label.UserPrefix+"suite"] != "enginetest" {
		t.Fatalf("labels %v", info.Labels)
	}
	for k, v := range dockertest.Labels() {
		if info.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q: the engine's config labels are not on the container", k, info.Labels[k], v)
		}
	}
}

// wantHardened fails t unless info runs with every capability dropped, the image's user, no
// network and a creation time after before.
func wantHardened(t *testing.T, info docker.ContainerInfo, before time.Time) {
	t.Helper()
	if len(info.CapDrop) != 1 || !strings.EqualFold(info.CapDrop[0], "ALL") {
		t.Fatalf("CapDrop %v", info.CapDrop)
	}
	if info.User != "" || info.Created.Before(before) || info.Created.After(time.Now().Add(time.Minute)) {
		t.Fatalf("user %q created %v", info.User, info.Created)
	}
	if _, ok := info.Networks["none"]; !ok || len(info.Networks) != 1 {
		t.Fatalf("networks %v, want only none", info.Networks)
	}
}

// wantProvable fails t unless info names the running init's pid and start and the engine
// reports the daemon's security options: what the host file plane proves a container's
// process with (actors/hostfs).
func wantProvable(t *testing.T, e *docker.Engine, info docker.ContainerInfo) {
	t.Helper()
	if info.Pid <= 0 || info.StartedAt.Before(info.Created) || info.StartedAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("pid %d started %v (created %v): want the running init's pid and start", info.Pid, info.StartedAt, info.Created)
	}
	if opts, err := e.SecurityOptions(testCtx(t)); err != nil || len(opts) == 0 {
		t.Fatalf("security options = %v, %v", opts, err)
	}
}

func TestEngineRunConflict(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	key := testKey(t)
	name, _ := workload(t, e, image, key)
	_, err := e.Run(testCtx(t), docker.NewCreateSpec(name, image))
	if !errors.Is(err, docker.ErrConflict) {
		t.Fatalf("second run = %v, want ErrConflict", err)
	}
}

// TestEngineRename: a rename moves the name (the old one is free, the ID stays), a taken name is
// ErrConflict and an absent target ErrNotFound (the warm pool's hand-out relies on all three).
func TestEngineRename(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	from, id := workload(t, e, image, testKey(t))
	taken, _ := workload(t, e, image, testKey(t))
	to := docker.ContainerName(testKey(t), "busybox", "")
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, _ = e.Remove(c, to)
	})
	c := testCtx(t)
	if err := e.Rename(c, from, taken); !errors.Is(err, docker.ErrConflict) {
		t.Fatalf("Rename to a taken name = %v, want ErrConflict", err)
	}
	if err := e.Rename(c, from, to); err != nil {
		t.Fatalf("Rename = %v", err)
	}
	if info, err := e.Inspect(c, to); err != nil || info.ID != id {
		t.Fatalf("Inspect of the new name = %s, %v; want %s", info.ID, err, id)
	}
	if err := e.Rename(c, from, to); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("Rename of the old name = %v, want ErrNotFound", err)
	}
}

func TestEngineAbsent(t *testing.T) {
	e := newEngine(t)
	missing := docker.ContainerName(testKey(t), "busybox", "")
	c := testCtx(t)
	if _, err := e.Inspect(c, missing); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("Inspect = %v, want ErrNotFound", err)
	}
	if err := e.Start(c, missing); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("Start = %v, want ErrNotFound", err)
	}
	if err := e.Pause(c, missing); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("Pause = %v, want ErrNotFound", err)
	}
	if err := e.Unpause(c, missing); err != nil {
		t.Fatalf("Unpause of an absent container = %v, want lifted", err)
	}
	if out, err := e.Remove(c, missing); err != nil || out != docker.Absent {
		t.Fatalf("Remove = %v, %v; want Absent", out, err)
	}
	if _, err := e.Stat(c, missing, "/etc/passwd"); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("Stat in an absent container = %v, want ErrNotFound (never path absence)", err)
	}
	tarball, _ := docker.BuildTar(docker.FileEntry("/f", nil, 0o644, 0, 0))
	if err := e.CopyIn(c, missing, tarball); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("CopyIn = %v, want ErrNotFound", err)
	}
}

func TestEngineRemove(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	if out, err := e.Remove(testCtx(t), name); err != nil || out != docker.Removed {
		t.Fatalf("Remove = %v, %v; want Removed", out, err)
	}
	if out, err := e.Remove(testCtx(t), name); err != nil || out != docker.Absent {
		t.Fatalf("second Remove = %v, %v; want Absent", out, err)
	}
}

// TestEngineRemoveConcurrent: removals of one container at once (another engine's dispose, a reap,
// this engine's own) all succeed. The daemon refuses all but the first while it works ("removal
// of container … is already in progress"); the others wait for it and report the container
// Removed: it was there, and it is gone.
func TestEngineRemoveConcurrent(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	const n = 6
	outs := make([]docker.RemoveOutcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = e.Remove(testCtx(t), name) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || outs[i] == 0 {
			t.Errorf("Remove %d of %d at once = %v, %v; want Removed or Absent", i+1, n, outs[i], errs[i])
		}
	}
	if !slices.Contains(outs, docker.Removed) {
		t.Errorf("removals at once = %v: none Removed", outs)
	}
	if out, err := e.Remove(testCtx(t), name); err != nil || out != docker.Absent {
		t.Fatalf("Remove after them = %v, %v; want Absent", out, err)
	}
}

func TestEngineStartStopped(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t), docker.WithCmd("true"))
	waitStatus(t, e, name, "exited")
	if err := e.Pause(testCtx(t), name); !errors.Is(err, docker.ErrNotRunning) {
		t.Fatalf("Pause of a stopped container = %v, want ErrNotRunning", err)
	}
	if err := e.Start(testCtx(t), name); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, name, "exited")
}

func waitStatus(t *testing.T, e docker.Containers, name, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Inspect(testCtx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %s, want %s", name, info.Status, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEnginePauseUnpause(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, id := workload(t, e, image, testKey(t))
	c := testCtx(t)
	if err := e.Pause(c, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Unpause(context.Background(), name) })
	if info, err := e.Inspect(c, name); err != nil || !info.Paused || info.Status != "paused" {
		t.Fatalf("after pause: %+v, %v", info, err)
	}
	if err := e.Pause(c, name); !errors.Is(err, docker.ErrPaused) {
		t.Fatalf("second Pause = %v, want ErrPaused", err)
	}
	for _, target := range []string{name, id} {
		out, err := e.Exec(c, docker.ExecRequest{Target: target, Argv: []string{"echo", "ran"}})
		if !errors.Is(err, docker.ErrPaused) || out.ExitCode == 0 || len(out.Stdout) != 0 {
			t.Fatalf("Exec on a frozen container (%s) = %+v, %v; want the frozen refusal", target, out, err)
		}
	}
	// The daemon, not the guest, serves the tar plane: it works while frozen.
	if ent, err := e.Stat(c, name, "/etc/passwd"); err != nil || ent == nil || ent.Type != docker.EntryFile {
		t.Fatalf("Stat while frozen = %+v, %v", ent, err)
	}
	if err := e.Unpause(c, name); err != nil {
		t.Fatal(err)
	}
	if err := e.Unpause(c, name); err != nil {
		t.Fatalf("Unpause of a running container = %v, want lifted", err)
	}
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"echo", "ran"}}); err != nil || string(out.Stdout) != "ran\n" {
		t.Fatalf("Exec after thaw = %+v, %v", out, err)
	}
}

// TestEnginePauseBusy freezes a guest busy forking and writing, over and over: cgroup v1's freezer
// then gives up now and again ("unable to freeze"). Every refusal must be ErrFreezeFailed,
// and after it an Unpause leaves the guest running. The refusal is load-dependent, so a run
// that sees none says so and passes on what it did see.
func TestEnginePauseBusy(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	c := testCtx(t)
	// Forking loops only: a guest's sync would flush the host's filesystems and stall every
	// other test sharing the daemon.
	busy := "for i in 1 2 3 4 5 6 7 8; do (while :; do /bin/true; done) >/dev/null 2>&1 & done"
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", busy}}); err != nil || out.ExitCode != 0 {
		t.Fatalf("start the busy guest: %+v, %v", out, err)
	}
	t.Cleanup(func() { _ = e.Unpause(context.Background(), name) })
	refused, unsettled, tries := 0, 0, 0
	stop := time.Now().Add(20 * time.Second)
	for i := 0; i < 300 && refused < 2 && time.Now().Before(stop); i++ {
		tries++
		err := e.Pause(c, name)
		switch {
		case err == nil:
		case errors.Is(err, docker.ErrFreezeFailed):
			refused++
			t.Logf("pause %d: %v", i, err)
		case errors.Is(err, docker.ErrPaused):
			// 20.10 applies containerd's events late: an unpause's "resumed" can land after
			// the next pause is asked (see actors/freeze.go). Not this test's subject.
			t.Logf("pause %d: %v", i, err)
		default:
			// The same late events can make the refusal and the inspect after it disagree
			// ("already paused", then an unpaused inspect): unclassifiable, and rare.
			unsettled++
			t.Logf("pause %d: %v (the daemon's state was changing under it)", i, err)
		}
		thawed(t, e, name, i)
	}
	if unsettled > tries/4 {
		t.Errorf("%d of %d pauses were refused with no class: want nil, ErrFreezeFailed or ErrPaused", unsettled, tries)
	}
	if refused == 0 {
		t.Logf("the freezer gave up on no pause this run (it is load-dependent); nothing to classify")
	}
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"echo", "ran"}}); err != nil || string(out.Stdout) != "ran\n" {
		t.Fatalf("Exec after the loop = %+v, %v", out, err)
	}
}

// thawed unpauses name until the daemon agrees it is running and not paused: on 20.10 an
// unpause can be answered "not paused" while a late event is about to mark it paused.
func thawed(t *testing.T, e docker.Containers, name string, i int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		uerr := e.Unpause(testCtx(t), name)
		info, ierr := e.Inspect(testCtx(t), name)
		if uerr == nil && ierr == nil && info.Running && !info.Paused {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after pause %d, unpause = %v and inspect = %+v, %v; want running, not paused", i, uerr, info, ierr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
