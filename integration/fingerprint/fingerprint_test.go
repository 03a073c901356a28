package fingerprint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/fingerprint"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

// The Docker fingerprint subject on the real engine (docker-backend §12.5): every kind of
// residue a call can leave is planted by the call and the probe must fail naming it, and the
// clean call passes. Each case runs on a fresh sandbox of its own.
func TestFingerprintCatchesResidue(t *testing.T) {
	b := itest.NewBackend(t)
	const sleeper = "sleep 1001"
	cases := []struct {
		name string
		// setup runs before the baseline and returns what the call needs to know.
		setup func(t *testing.T, ctx context.Context, sb *actors.Sandbox) string
		call  func(ctx context.Context, sb *actors.Sandbox, state string) error
		// want are texts the failure must name; none means the probe passes.
		want []string
	}{
		{name: "the clean call passes: a call directory written and reclaimed, a command run",
			call: func(ctx context.Context, sb *actors.Sandbox, _ string) error {
				if err := sb.WriteFile(ctx, "call-0a1b2c3d4e5f/input.txt", []byte("input\n"), "."); err != nil {
					return err
				}
				if _, err := sb.StatFile(ctx, "/etc/hosts", "/"); err != nil {
					return err
				}
				if _, err := sb.ReadFile(ctx, "/etc/resolv.conf", "/", 1<<16); err != nil {
					return err
				}
				if err := run(ctx, sb, "mkdir /tmp/confined; echo x > /tmp/confined/f; rm -rf /tmp/confined"); err != nil {
					return err
				}
				return sb.Reclaim(ctx, "call-0a1b2c3d4e5f", ".", time.Minute)
			}},
		{name: "a new file under the work dir",
			call: func(ctx context.Context, sb *actors.Sandbox, _ string) error {
				return sb.WriteFile(ctx, "left-behind.txt", []byte("residue\n"), ".")
			}, want: []string{fingerprintWorkDir + "/left-behind.txt"}},
		{name: "a new file outside the work dir",
			call: shell("echo residue > /tmp/left-behind"), want: []string{"/tmp/left-behind"}},
		{name: "a changed byte in an existing file",
			call: shell("printf X | dd of=/etc/passwd bs=1 seek=0 conv=notrunc 2>/dev/null"), want: []string{"/etc/passwd"}},
		{name: "a chmod", call: shell("chmod 600 /etc/group"), want: []string{"/etc/group"}},
		// The same size and mtime hide the change from a differ that compares
		// only those (Docker's naive differ, which fuse-overlayfs, vfs, btrfs and zfs use).
		{name: "a trojaned file whose size and mtime are put back",
			call: shell(trojanPasswd), want: []string{"/etc/passwd"}},
		{name: "a file in /dev/shm, which docker cp cannot see",
			call: shell("echo residue > /dev/shm/left-behind"), want: []string{"/dev/shm/left-behind"}},
		{name: "a background process left running",
			call: shell("nohup " + sleeper + " >/dev/null 2>&1 &"),
			want: []string{"programs not in the baseline", "sleep [" + sleeper + "]"}},
		{name: "a process killed and restarted under the same name",
			setup: func(t *testing.T, ctx context.Context, sb *actors.Sandbox) string {
				res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", "nohup "+sleeper+" >/dev/null 2>&1 & echo $!"), "/", time.Minute)
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("start the sleeper: %v %s", err, res.StderrText())
				}
				return strings.TrimSpace(res.StdoutText())
			},
			call: func(ctx context.Context, sb *actors.Sandbox, pid string) error {
				return run(ctx, sb, "kill "+pid+"; sleep 0.2; nohup "+sleeper+" >/dev/null 2>&1 &")
			},
			want: []string{"programs not in the baseline", "programs of the baseline gone", "sleep [" + sleeper + "]"}},
		{name: "a changed /etc/hosts", call: shell("echo '10.9.9.9 planted' >> /etc/hosts"), want: []string{"/etc/hosts"}},
		{name: "a chmod of /etc/hosts", call: shell("chmod 600 /etc/hosts"), want: []string{"/etc/hosts"}},
		{name: "a chmod of /etc/hosts undone leaves nothing", call: shell("chmod 600 /etc/hosts; chmod 644 /etc/hosts")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noObserverOutlives(t)
			sb, s := freshSandbox(t, b)
			ctx := itest.Context(t)
			var state string
			if tc.setup != nil {
				state = tc.setup(t, ctx, sb)
			}
			start := time.Now()
			results, err := conformance.AssertNothingLeftBehind(ctx, s, func(ctx context.Context) error {
				return tc.call(ctx, sb, state)
			})
			t.Logf("probe took %v", time.Since(start).Round(time.Millisecond))
			if len(tc.want) == 0 {
				mustAllPass(t, results, err)
				return
			}
			var cf *sandbox.ConformanceFailure
			if !errors.As(err, &cf) {
				t.Fatalf("got %v (results %+v), want a conformance failure", err, results)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("the failure does not name %q:\n%v", want, err)
				}
			}
			for _, r := range results {
				if r.Name == "the-call-and-its-cleanup-ran" && !r.Passed {
					t.Fatalf("the planting call itself failed: %s", r.Reason)
				}
			}
		})
	}
}

// Every refusal of §12.5 is a refusal on the real engine, never a fingerprint.
func TestFingerprintRefuses(t *testing.T) {
	b := itest.NewBackend(t)
	t.Run("a dirty root filesystem baseline", func(t *testing.T) {
		noObserverOutlives(t)
		sb, s := freshSandbox(t, b)
		guestSh(t, itest.Context(t), sb, "echo before > /tmp/already-there")
		assertRefusedBeforeTheCall(t, s, "not pristine", "/tmp/already-there")
	})
	t.Run("the supervisor's paths planted where no supervisor runs", func(t *testing.T) {
		// They are the engine's own only in a sandbox on the exec channel; here a guest made
		// them, and the baseline holding them is not pristine.
		noObserverOutlives(t)
		sb, s := freshSandbox(t, b)
		guestSh(t, itest.Context(t), sb, "echo planted > /maf-sandbox-execd && mkdir /.maf-sandbox-exec")
		assertRefusedBeforeTheCall(t, s, "not pristine", "/.maf-sandbox-exec, /maf-sandbox-execd")
	})
	t.Run("a dirty tmpfs baseline", func(t *testing.T) {
		noObserverOutlives(t)
		sb, s := freshSandbox(t, b)
		guestSh(t, itest.Context(t), sb, "echo before > /dev/shm/already-there")
		assertRefusedBeforeTheCall(t, s, "not pristine", "/dev/shm/already-there")
	})
	t.Run("an exceeded byte bound", func(t *testing.T) {
		noObserverOutlives(t)
		_, s := freshSandbox(t, b, fingerprint.WithLimits(1, 1000))
		_, err := s.Fingerprint(itest.Context(t))
		if !errors.Is(err, fingerprint.ErrLimit) {
			t.Fatalf("got %v, want ErrLimit", err)
		}
	})
	t.Run("an exceeded entry bound", func(t *testing.T) {
		noObserverOutlives(t)
		_, s := freshSandbox(t, b, fingerprint.WithLimits(1<<20, 2))
		_, err := s.Fingerprint(itest.Context(t))
		if !errors.Is(err, fingerprint.ErrLimit) {
			t.Fatalf("got %v, want ErrLimit", err)
		}
	})
	t.Run("an unreadable measurement", func(t *testing.T) {
		// Root without CAP_DAC_OVERRIDE, which is all the observer is, cannot open a file whose
		// mode grants nobody anything.
		noObserverOutlives(t)
		sb, s := freshSandbox(t, b)
		_, err := conformance.AssertNothingLeftBehind(itest.Context(t), s, shellCall(sb, "touch /dev/shm/sealed; chmod 000 /dev/shm/sealed"))
		if err == nil || !strings.Contains(err.Error(), "the-final-state-is-measured") || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("got %v, want the final measurement failed as unreadable", err)
		}
	})
	t.Run("a writable declared mount", func(t *testing.T) {
		noObserverOutlives(t)
		c := plainContainer(t, "-v", "/data")
		assertRefusedContainer(t, c, "writable declared mount at /data")
	})
	t.Run("a shared PID namespace", func(t *testing.T) {
		noObserverOutlives(t)
		other := plainContainer(t)
		c := plainContainer(t, "--pid", "container:"+other.id)
		assertRefusedContainer(t, c, "shares its PID namespace")
	})
	t.Run("a privileged workload", func(t *testing.T) {
		// This engine cannot start a privileged container (rootless: "unable to apply caps"),
		// so it is only created: the refusal comes before any state of it is read.
		noObserverOutlives(t)
		c := plainContainer(t, "--privileged", "--created-only")
		assertRefusedContainer(t, c, "privileged")
	})
	t.Run("a replaced container", func(t *testing.T) {
		noObserverOutlives(t)
		c := plainContainer(t)
		s, err := fingerprint.New(itest.Context(t), fingerprintEngine(t), container{c.name, strings.Repeat("0", 64)},
			fingerprint.WithObserverImage(observerImage(t)))
		if err != nil {
			t.Fatal(err)
		}
		assertRefusedBeforeTheCall(t, s, "not the sandbox's")
	})
}

// The observer container runs hardened as §12.5 says and is removed when its caller's context
// ends mid-run: killing the client does not stop a container, so the removal must.
func TestObserverContainerHardenedAndRemovedOnCancel(t *testing.T) {
	noObserverOutlives(t)
	eng := fingerprintEngine(t)
	c := plainContainer(t)
	// The busybox image by ID, told to sleep, stands in for a slow observer.
	imageID := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", fingerprintWorkload(t))
	name := fingerprint.ObserverNamePrefix + "cancel-" + dockertest.Process()
	ctx, cancel := context.WithCancel(itest.Context(t))
	done := make(chan error, 1)
	go func() {
		_, err := eng.RunObserver(ctx, docker.ObserverSpec{Name: name, Image: imageID, Target: c.id, Args: []string{"sleep", "60"},
			Labels: []label.Label{{Key: label.Role, Value: label.RoleObserver}}, MaxOutputBytes: 1 << 10, Timeout: 2 * time.Minute})
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	var got string
	for time.Now().Before(deadline) {
		out, _, err := dockertest.DockerErr(itest.Context(t), "inspect", "--format",
			`{{.State.Running}}|{{.HostConfig.NetworkMode}}|{{.HostConfig.ReadonlyRootfs}}|{{json .HostConfig.CapDrop}}|{{json .HostConfig.CapAdd}}|{{.HostConfig.PidMode}}|{{.HostConfig.Privileged}}|{{.Config.User}}|{{json .HostConfig.SecurityOpt}}`, name)
		if err == nil && strings.HasPrefix(string(out), "true|") {
			// The daemon writes capabilities with their CAP_ prefix when they came through the API.
			got = strings.ReplaceAll(strings.TrimSpace(string(out)), `"CAP_`, `"`)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := `true|none|true|["ALL"]|["SYS_PTRACE"]|container:` + c.id + `|false|0:0|["no-new-privileges"]`
	if got != want {
		cancel()
		<-done
		t.Fatalf("observer container\n%s\nwant\n%s", got, want)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RunObserver after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunObserver did not return after its context was cancelled")
	}
	if out, _, err := dockertest.DockerErr(context.Background(), "ps", "-a", "-q", "--filter", "name=^/"+name+"$"); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("the observer container is still there after cancel: %q %v", out, err)
	}
}

// shell is a call that runs script in the guest and fails unless it exits 0.
// trojanPasswd overwrites the first byte of /etc/passwd and puts its mtime back, exactly as
// the published attack on naive differs does, then checks that it took.
const trojanPasswd = "touch -r /etc/passwd ./ref && printf X | dd of=/etc/passwd bs=1 count=1 conv=notrunc 2>/dev/null && " +
	"touch -r ./ref /etc/passwd && rm ./ref && test \"$(head -c 4 /etc/passwd)\" = Xoot"

func shell(script string) func(ctx context.Context, sb *actors.Sandbox, _ string) error {
	return func(ctx context.Context, sb *actors.Sandbox, _ string) error { return run(ctx, sb, script) }
}

func shellCall(sb *actors.Sandbox, script string) func(ctx context.Context) error {
	return func(ctx context.Context) error { return run(ctx, sb, script) }
}

func run(ctx context.Context, sb sandbox.Sandbox, script string) error {
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", script), "/", time.Minute)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%q exited %d: %s", script, res.ExitCode, res.StderrText())
	}
	return nil
}

func mustAllPass(t *testing.T, results []conformance.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the clean call failed the probe: %v", err)
	}
	if len(results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range results {
		if !r.Passed {
			t.Fatalf("result %+v did not pass (a skip is not proof)", r)
		}
	}
}

// assertRefusedBeforeTheCall runs the probe and wants it failed at the baseline, naming want,
// without running the call.
func assertRefusedBeforeTheCall(t *testing.T, s *fingerprint.Subject, want ...string) {
	t.Helper()
	called := false
	results, err := conformance.AssertNothingLeftBehind(itest.Context(t), s, func(context.Context) error { called = true; return nil })
	var cf *sandbox.ConformanceFailure
	if !errors.As(err, &cf) || called || len(results) != 1 || results[0].Passed || results[0].Skipped {
		t.Fatalf("got %+v, %v (call ran: %v); want a failure at the baseline", results, err, called)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal does not name %q: %v", w, err)
		}
	}
}

func assertRefusedContainer(t *testing.T, c container, want string) {
	t.Helper()
	s, err := fingerprint.New(itest.Context(t), fingerprintEngine(t), c, fingerprint.WithObserverImage(observerImage(t)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Fingerprint(itest.Context(t))
	if !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want a refusal naming %q", err, want)
	}
	assertRefusedBeforeTheCall(t, s, want)
}

// container is a workload the backend did not make, for the shapes it never makes.
type container struct{ name, id string }

func (c container) ContainerName() string { return c.name }
func (c container) InstanceID() string    { return c.id }

// plainContainer runs a sleeping busybox container with the test labels and extra flags (the
// flag --created-only creates it without starting it), and removes it (and its anonymous
// volumes) when the test ends.
func plainContainer(t *testing.T, flags ...string) container {
	t.Helper()
	name := "maf-fingerprint-fixture-" + itest.NewKey(t).Scope
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, stderr, err := dockertest.DockerErr(ctx, "rm", "-f", "-v", name); err != nil {
			t.Errorf("remove %s: %v: %s", name, err, stderr)
		}
	})
	verb := []string{"run", "-d"}
	if i := slices.Index(flags, "--created-only"); i >= 0 {
		verb = []string{"create"}
		flags = slices.Delete(slices.Clone(flags), i, i+1)
	}
	args := append(append(verb, "--name", name, "--network", "none"), dockertest.LabelArgs()...)
	args = append(append(args, flags...), fingerprintWorkload(t), "sleep", "infinity")
	id := dockertest.Docker(t, args...)
	return container{name: name, id: strings.TrimSpace(id)}
}

// The observer container is removed when its run outlives its timeout, and when the calling
// goroutine panics after the container ran (a logger core panics on the run's own log line,
// which comes before the removal; the run has timed out, so the container, auto-removed only
// when it exits, is still running then).
func TestObserverContainerRemovedOnTimeoutAndPanic(t *testing.T) {
	c := plainContainer(t)
	imageID := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", fingerprintWorkload(t))
	spec := func(name string, args []string, timeout time.Duration) docker.ObserverSpec {
		return docker.ObserverSpec{Name: fingerprint.ObserverNamePrefix + name + "-" + dockertest.Process(), Image: imageID,
			Target: c.id, Args: args, Labels: []label.Label{{Key: label.Role, Value: label.RoleObserver}},
			MaxOutputBytes: 1 << 10, Timeout: timeout}
	}
	gone := func(t *testing.T, name string) {
		t.Helper()
		out, _, err := dockertest.DockerErr(context.Background(), "ps", "-a", "-q", "--filter", "name=^/"+name+"$")
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("observer container %s is still there: %q %v", name, out, err)
		}
	}
	t.Run("timeout", func(t *testing.T) {
		noObserverOutlives(t)
		s := spec("timeout", []string{"sleep", "60"}, 2*time.Second)
		start := time.Now()
		_, err := fingerprintEngine(t).RunObserver(itest.Context(t), s)
		if !errors.Is(err, docker.ErrTimeout) {
			t.Fatalf("got %v, want ErrTimeout", err)
		}
		t.Logf("timed out and removed in %v", time.Since(start).Round(time.Millisecond))
		gone(t, s.Name)
	})
	t.Run("panic", func(t *testing.T) {
		noObserverOutlives(t)
		s := spec("panic", []string{"sleep", "60"}, 10*time.Second) // room for a loaded daemon to start it
		existed := false
		core := &panicOnRun{Core: zapcore.NewNopCore(), at: func() {
			_, _, err := dockertest.DockerErr(context.Background(), "inspect", "--format", "{{.Id}}", s.Name)
			existed = err == nil
			panic("boom in the middle of an observer run")
		}}
		e, err := docker.NewEngine(docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second},
			docker.WithLogger(zap.New(core)))
		if err != nil {
			t.Fatal(err)
		}
		var fe fingerprint.Engine = e
		func() {
			defer func() {
				if v := recover(); v == nil {
					t.Fatal("the run did not panic")
				}
			}()
			_, _ = fe.RunObserver(itest.Context(t), s)
		}()
		if !existed {
			t.Fatal("the observer container was not there when the panic came: the test proves nothing")
		}
		t.Logf("the container existed when the panic came: %v", existed)
		gone(t, s.Name)
	})
}

// panicOnRun is a logger core that calls at when the driver logs its observer run (op "run").
type panicOnRun struct {
	zapcore.Core
	at func()
}

func (p *panicOnRun) Enabled(zapcore.Level) bool        { return true }
func (p *panicOnRun) With([]zapcore.Field) zapcore.Core { return p }
func (p *panicOnRun) Sync() error                       { return nil }
func (p *panicOnRun) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	return ce.AddCore(e, p)
}

func (p *panicOnRun) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Key == "op" && f.String == "run" {
			p.at()
		}
	}
	return nil
}

// TestFingerprintOnTheExecChannel: a sandbox whose commands take the exec channel carries the
// engine's supervisor (its binary, its socket's directory and socket), which the baseline
// takes as the engine's own, as it takes the storage base: the clean call passes, and a call
// that rewrites the supervisor's binary is caught naming it.
func TestFingerprintOnTheExecChannel(t *testing.T) {
	b := itest.NewBackend(t, actors.WithExecChannel(itest.ExecSupervisor(t)))
	for _, tc := range []struct {
		name, script string
		want         string
	}{
		{name: "the clean call passes", script: "echo x > /tmp/f; rm /tmp/f"},
		{name: "a rewritten supervisor binary", script: "printf X | dd of=/maf-sandbox-execd bs=1 seek=4096 conv=notrunc 2>/dev/null",
			want: "/maf-sandbox-execd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noObserverOutlives(t)
			sb, s := freshSandbox(t, b)
			results, err := conformance.AssertNothingLeftBehind(itest.Context(t), s, shellCall(sb, tc.script))
			if tc.want == "" {
				mustAllPass(t, results, err)
			} else if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (results %+v), want a failure naming %s", err, results, tc.want)
			}
			if ch, _ := b.ExecPaths(); ch == 0 {
				t.Fatal("no command took the exec channel")
			}
		})
	}
}
