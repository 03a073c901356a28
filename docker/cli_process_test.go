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
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/enginetest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

// waitNoChildren fails the test if client processes outlive the calls that started them.
func waitNoChildren(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := docker.ChildProcesses(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leftover child processes: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustExec(t *testing.T, c docker.Driver, name string, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Exec(ctx, docker.ExecRequest{Target: name, Argv: argv})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("exec %v: %+v, %v", argv, out, err)
	}
}

// TestBoundedReadsUnderLoad runs 200 bounded reads and stats next to a 1 MiB file, eight at a
// time: none may hang, every one must answer as expected, and no client may outlive its call.
func TestBoundedReadsUnderLoad(t *testing.T) {
	image := dockertest.Busybox(t)
	c := newCLI(t)
	name, _ := enginetest.Workload(t, c, image, enginetest.Key(t))
	mustExec(t, c, name, "sh", "-c", "dd if=/dev/zero of=/big bs=1024 count=1024 2>/dev/null && printf small > /small")

	type op struct {
		what string
		do   func(ctx context.Context) error
	}
	ops := []op{
		{"stat big", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/big")
			if err == nil && (e == nil || e.Size != 1<<20) {
				err = errors.New("wrong entry")
			}
			return err
		}},
		{"read big over cap", func(ctx context.Context) error {
			_, _, err := c.Read(ctx, name, "/big", 1024)
			if errors.Is(err, docker.ErrCapExceeded) {
				return nil
			}
			return errors.Join(errors.New("cap not refused"), err)
		}},
		{"read small", func(ctx context.Context) error {
			_, b, err := c.Read(ctx, name, "/small", 1024)
			if err == nil && string(b) != "small" {
				err = errors.New("wrong bytes")
			}
			return err
		}},
		{"stat root", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/")
			if err == nil && (e == nil || e.Type != docker.EntryDir) {
				err = errors.New("wrong entry")
			}
			return err
		}},
		{"stat absent", func(ctx context.Context) error {
			e, err := c.Stat(ctx, name, "/absent")
			if err == nil && e != nil {
				err = errors.New("absent path described")
			}
			return err
		}},
	}
	const total, workers = 200, 8
	jobs := make(chan int)
	var (
		mu      sync.Mutex
		fails   []error
		slowest time.Duration
		wg      sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				o := ops[i%len(ops)]
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := o.do(ctx)
				el := time.Since(t0)
				cancel()
				mu.Lock()
				if el > slowest {
					slowest = el
				}
				if err != nil {
					fails = append(fails, errors.Join(errors.New(o.what), err))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, err := range fails {
		t.Error(err)
	}
	t.Logf("%d operations, %d at a time: %s in all, %s each on average, slowest %s",
		total, workers, time.Since(start).Round(time.Millisecond), (time.Since(start) / total).Round(time.Millisecond), slowest.Round(time.Millisecond))
	waitNoChildren(t)
}

// TestControlTimeout: a control call that outlives CommandTimeout is a TimeoutError, never the
// caller's context error, and its client is reaped.
func TestControlTimeout(t *testing.T) {
	dockertest.Require(t)
	c := newCLI(t, func(cfg *docker.Config) { cfg.CommandTimeout = time.Millisecond })
	_, err := c.ServerOS(context.Background())
	var te *docker.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, docker.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a TimeoutError", err)
	}
	waitNoChildren(t)
}

// unreachableCLI returns the CLI driver bound (through the default context) to a socket no daemon
// serves.
func unreachableCLI(t *testing.T, host string) docker.Driver {
	t.Setenv("DOCKER_CONTEXT", "")
	t.Setenv("DOCKER_HOST", host)
	return newCLI(t)
}

func TestUnreachableIsNeverAbsence(t *testing.T) {
	dockertest.Require(t)
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // the socket file stays, nothing listens: a stopped daemon's socket
	cases := []struct {
		name string
		host string
	}{
		{"no socket", "unix://" + filepath.Join(dir, "missing.sock")},
		{"stopped daemon socket", "unix://" + dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := unreachableCLI(t, tc.host)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if b, err := c.Bind(ctx); err != nil || b.Endpoint != tc.host {
				t.Fatalf("Bind = %+v, %v: binding needs no daemon", b, err)
			}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) || errors.Is(err, docker.ErrPathAbsent) {
					t.Fatalf("%s: err = %v, want ErrUnreachable and never absence", what, err)
				}
			}
			const target = "maf-sandbox-docker-000000000000"
			_, err := c.Inspect(ctx, target)
			check("Inspect", err)
			e, err := c.Stat(ctx, target, "/etc/passwd")
			if e != nil || err == nil {
				t.Fatalf("Stat = %v, %v: an unreachable daemon read as absence", e, err)
			}
			check("Stat", err)
			_, _, err = c.Read(ctx, target, "/etc/passwd", 10)
			check("Read", err)
			_, err = c.Remove(ctx, target)
			check("Remove", err)
			check("Unpause", c.Unpause(ctx, target))
			check("Pause", c.Pause(ctx, target))
			ok, err := c.ImageExists(ctx, "busybox")
			if ok {
				t.Fatal("ImageExists = true")
			}
			check("ImageExists", err)
			_, err = c.ListNames(ctx, nil, "")
			check("ListNames", err)
			_, err = c.Exec(ctx, docker.ExecRequest{Target: target, Argv: []string{"true"}})
			if err != nil {
				t.Fatalf("Exec = %v: a failed exec is a result", err)
			}
			events, err := c.Events(ctx, docker.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var last docker.Event
			for ev := range events {
				last = ev
			}
			check("Events", last.Err)
			waitNoChildren(t)
		})
	}
}

func TestBogusContext(t *testing.T) {
	dockertest.Require(t)
	t.Setenv("DOCKER_CONTEXT", "maf-sandbox-no-such-context")
	c := newCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Inspect(ctx, "maf-sandbox-docker-000000000000")
	if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}

// TestDeletedContext: once bound, every command names the context; deleting it fails commands
// (as unreachable) instead of falling back to another context.
func TestDeletedContext(t *testing.T) {
	dockertest.Require(t)
	// The endpoint the test daemon is reached at, as the ambient client resolves it.
	out, err := exec.Command("docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}").Output()
	endpoint := strings.TrimSpace(string(out))
	if err != nil || endpoint == "" {
		t.Fatalf("resolve the test daemon's endpoint: %q, %v", out, err)
	}
	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)
	t.Setenv("DOCKER_HOST", "")
	const name = "maf-sandbox-test-ctx"
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
	c := newCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := c.Bind(ctx)
	if err != nil || b.Context != name || b.Endpoint != endpoint {
		t.Fatalf("Bind = %+v, %v", b, err)
	}
	if osName, err := c.ServerOS(ctx); err != nil || osName != "linux" {
		t.Fatalf("ServerOS through the context = %q, %v", osName, err)
	}
	dockerCmd("context", "rm", "-f", name)
	_, err = c.Inspect(ctx, "maf-sandbox-docker-000000000000")
	if !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("err = %v: a deleted context must fail as unreachable, never fall back", err)
	}
}

// TestEventsNoLeak: the stream's goroutines and client end when its context does.
func TestEventsNoLeak(t *testing.T) {
	image := dockertest.Busybox(t)
	c := newCLI(t)
	if _, err := c.Bind(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	key := enginetest.Key(t)
	ctx, cancel := context.WithCancel(context.Background())
	events, err := c.Events(ctx, docker.EventFilter{Labels: label.KeyFilter(key, nil)})
	if err != nil {
		t.Fatal(err)
	}
	name, _ := enginetest.Workload(t, c, image, key, docker.WithCmd("true"))
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for !seen["start"] || !seen["die"] {
		select {
		case ev := <-events:
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if ev.Name == name {
				seen[ev.Action] = true
			}
		case <-timeout:
			t.Fatalf("saw %v", seen)
		}
	}
	cancel()
	for range events {
	}
	waitNoChildren(t)
}
