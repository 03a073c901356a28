package docker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

// TestControlTimeout: a control call that outlives CommandTimeout is a TimeoutError,
// never the caller's context error; the caller's own deadline is its context's error.
func TestControlTimeout(t *testing.T) {
	dockertest.Require(t)
	a := newEngine(t)
	if _, err := a.ServerOS(testCtx(t)); err != nil { // bound and negotiated
		t.Fatal(err)
	}
	short := newEngine(t, func(cfg *docker.Config) { cfg.CommandTimeout = time.Nanosecond })
	_, err := short.ServerOS(context.Background())
	var te *docker.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, docker.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a TimeoutError", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err = a.Inspect(ctx, "maf-sandbox-docker-000000000000")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, docker.ErrTimeout) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

// TestUnreachableIsNeverAbsence: a daemon that cannot be reached fails every call as
// unreachable, never as absence; binding itself needs no daemon.
func TestUnreachableIsNeverAbsence(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	cases := []struct {
		name string
		host string
	}{
		{"no socket", "unix://" + filepath.Join(dir, "missing.sock")},
		{"stopped daemon socket", "unix://" + dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONTEXT", "")
			t.Setenv("DOCKER_HOST", tc.host)
			a := newEngine(t)
			ctx := testCtx(t)
			if b, err := a.Bind(ctx); err != nil || b.Endpoint != tc.host {
				t.Fatalf("Bind = %+v, %v: binding needs no daemon", b, err)
			}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) || errors.Is(err, docker.ErrPathAbsent) {
					t.Fatalf("%s: err = %v, want ErrUnreachable and never absence", what, err)
				}
			}
			const target = "maf-sandbox-docker-000000000000"
			_, err := a.Inspect(ctx, target)
			check("Inspect", err)
			e, err := a.Stat(ctx, target, "/etc/passwd")
			if e != nil {
				t.Fatalf("Stat = %v", e)
			}
			check("Stat", err)
			_, err = a.StatType(ctx, target, "/etc/passwd")
			check("StatType", err)
			_, _, err = a.Read(ctx, target, "/etc/passwd", 10)
			check("Read", err)
			_, err = a.Remove(ctx, target)
			check("Remove", err)
			check("Unpause", a.Unpause(ctx, target))
			check("Pause", a.Pause(ctx, target))
			ok, err := a.ImageExists(ctx, "busybox")
			if ok {
				t.Fatal("ImageExists = true")
			}
			check("ImageExists", err)
			_, err = a.ListNames(ctx, nil, "")
			check("ListNames", err)
			_, err = a.Exec(ctx, docker.ExecRequest{Target: target, Argv: []string{"true"}})
			check("Exec", err)
			_, err = a.Events(ctx, docker.EventFilter{})
			check("Events", err)
		})
	}
}

// TestDeletedContext: bound through a named context, the API refuses as unreachable
// once that context is deleted, and never falls back to another one.
func TestDeletedContext(t *testing.T) {
	dockertest.Require(t)
	out, err := exec.Command("docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}").Output()
	endpoint := strings.TrimSpace(string(out))
	if err != nil || endpoint == "" {
		t.Fatalf("resolve the test daemon's endpoint: %q, %v", out, err)
	}
	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)
	t.Setenv("DOCKER_HOST", "")
	const name = "maf-sandbox-test-api-ctx"
	dockerCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("docker", args...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfgDir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	dockerCmd("context", "create", name, "--docker", "host="+endpoint)
	t.Setenv("DOCKER_CONTEXT", name)
	a := newEngine(t)
	ctx := testCtx(t)
	b, err := a.Bind(ctx)
	if err != nil || b.Context != name || b.Endpoint != endpoint {
		t.Fatalf("Bind = %+v, %v", b, err)
	}
	if osName, err := a.ServerOS(ctx); err != nil || osName != "linux" {
		t.Fatalf("ServerOS through the context = %q, %v", osName, err)
	}
	dockerCmd("context", "rm", "-f", name)
	_, err = a.Inspect(ctx, "maf-sandbox-docker-000000000000")
	if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("err = %v: a deleted context must fail as unreachable, never fall back", err)
	}
}

func TestBogusContext(t *testing.T) {
	dockertest.Require(t)
	t.Setenv("DOCKER_CONTEXT", "maf-sandbox-no-such-context")
	_, err := newEngine(t).Inspect(testCtx(t), "maf-sandbox-docker-000000000000")
	if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}

// TestStatType: the archive-stat answer agrees with the archive header on everything
// but the owner, which it does not carry.
func TestStatType(t *testing.T) {
	image := dockertest.Busybox(t)
	a := newEngine(t)
	name, id := workload(t, a, image, testKey(t))
	ctx := testCtx(t)
	out, err := a.Exec(ctx, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c",
		"mkdir -p /t/d && printf abc > /t/d/f && chmod 4751 /t/d/f && ln -s /etc/passwd /t/lnk && mkfifo /t/fifo && chmod 1777 /t/d"}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", out, err)
	}
	for _, target := range []string{name, id} {
		for _, p := range []string{"/t/d", "/t/d/f", "/t/lnk", "/t/fifo", "/", "/t/none", "/t/none/deeper"} {
			full, err := a.Stat(ctx, target, p)
			if err != nil {
				t.Fatalf("Stat(%s) = %v", p, err)
			}
			quick, err := a.StatType(ctx, target, p)
			if err != nil {
				t.Fatalf("StatType(%s) = %v", p, err)
			}
			if (full == nil) != (quick == nil) {
				t.Fatalf("%s: Stat %+v, StatType %+v", p, full, quick)
			}
			if full == nil {
				continue
			}
			if quick.Type != full.Type || quick.Size != full.Size || quick.Mode&0o7777 != full.Mode&0o7777 ||
				quick.LinkTarget != full.LinkTarget || quick.UID != -1 || quick.GID != -1 {
				t.Fatalf("%s: StatType %+v, Stat %+v", p, *quick, *full)
			}
		}
	}
	missing := docker.ContainerName(testKey(t), "busybox", "")
	if _, err := a.StatType(ctx, missing, "/etc/passwd"); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("StatType in an absent container = %v, want ErrNotFound", err)
	}
}

// TestExecWithStart: started is called exactly once, while a long command still runs,
// and before the call returns, also when the exec is refused.
func TestExecWithStart(t *testing.T) {
	image := dockertest.Busybox(t)
	a := newEngine(t)
	name, _ := workload(t, a, image, testKey(t))
	ctx := testCtx(t)

	var calls atomic.Int32
	startedAt := make(chan time.Time, 1)
	begin := time.Now()
	out, err := a.ExecWithStart(ctx, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "sleep 1; echo done"}}, func() {
		calls.Add(1)
		startedAt <- time.Now()
	})
	ended := time.Now()
	if err != nil || string(out.Stdout) != "done\n" {
		t.Fatalf("ExecWithStart = %+v, %v", out, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("started called %d times", calls.Load())
	}
	if at := <-startedAt; ended.Sub(at) < 700*time.Millisecond {
		t.Fatalf("started %s after the call began and %s before it ended: not at the process start", at.Sub(begin), ended.Sub(at))
	}

	// A freeze right after started is harmless: the exec finishes after the thaw.
	var wg sync.WaitGroup
	wg.Add(1)
	var execErr error
	go func() {
		defer wg.Done()
		var o docker.ExecOutput
		o, execErr = a.ExecWithStart(ctx, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "sleep 0.3; echo ok"}}, func() {
			if err := a.Pause(ctx, name); err != nil {
				t.Errorf("pause after start: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
			if err := a.Unpause(ctx, name); err != nil {
				t.Errorf("unpause: %v", err)
			}
		})
		if execErr == nil && string(o.Stdout) != "ok\n" {
			execErr = errors.New("stdout " + string(o.Stdout))
		}
	}()
	wg.Wait()
	if execErr != nil {
		t.Fatal(execErr)
	}

	if err := a.Pause(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Unpause(context.Background(), name) })
	calls.Store(0)
	out, err = a.ExecWithStart(ctx, docker.ExecRequest{Target: name, Argv: []string{"true"}}, func() { calls.Add(1) })
	if !errors.Is(err, docker.ErrPaused) || out.ExitCode == 0 || calls.Load() != 1 {
		t.Fatalf("refused ExecWithStart = %+v, %v, started %d times", out, err, calls.Load())
	}
}

// TestNoLeaks: after every kind of call, the clean ends and the abrupt ones (a cap
// refused on the header, an output budget spent, a cancelled exec, a stream cancelled), no
// goroutine of the API is left.
func TestNoLeaks(t *testing.T) {
	image := dockertest.Busybox(t)
	a := newEngine(t)
	if _, err := a.ServerOS(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	name, id := workload(t, a, image, testKey(t))
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := testCtx(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := a.Inspect(ctx, name)
	must("inspect", err)
	_, err = a.Exec(ctx, docker.ExecRequest{Target: id, Argv: []string{"dd", "if=/dev/zero", "of=/big", "bs=1024", "count=1024"}})
	must("exec", err)
	_, _, err = a.Read(ctx, id, "/big", 10)
	if !errors.Is(err, docker.ErrCapExceeded) {
		t.Fatalf("read over the cap = %v", err)
	}
	_, err = a.Stat(ctx, id, "/etc")
	must("stat", err)
	_, err = a.StatType(ctx, id, "/etc")
	must("stat type", err)
	tarball, _ := docker.BuildTar(docker.FileEntry("/f", []byte("x"), 0o644, 0, 0))
	must("copy in", a.CopyIn(ctx, id, tarball))
	_, err = a.Exec(ctx, docker.ExecRequest{Target: id, Argv: []string{"yes"}, MaxOutputBytes: 1024})
	if !errors.Is(err, docker.ErrOutputLimit) {
		t.Fatalf("exec over budget = %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.Exec(cctx, docker.ExecRequest{Target: id, Argv: []string{"sleep", "5"}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled exec = %v", err)
	}
	_, err = a.ExecWithStart(ctx, docker.ExecRequest{Target: id, Argv: []string{"true"}}, func() {})
	must("exec with start", err)
	_, err = a.ListNames(ctx, label.KeyFilter(testKey(t), nil), "")
	must("list", err)
	sctx, stop := context.WithCancel(ctx)
	events, err := a.Events(sctx, docker.EventFilter{Containers: []string{id}})
	must("events", err)
	must("pause", a.Pause(ctx, id))
	must("unpause", a.Unpause(ctx, id))
	for ev := range events {
		if ev.Action == "unpause" {
			break
		}
	}
	stop()
	for range events {
	}
}
