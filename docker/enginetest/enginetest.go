// Package enginetest is the suite every implementation of the docker engine seam answers
// against a real Docker engine: one set of named subtests, so the CLI and any later engine-API
// implementation are held to the same behaviour.
//
// It is test code: it imports testing and internal/dockertest, and only tests import it.
package enginetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// callTimeout bounds each engine call the suite makes.
const callTimeout = 60 * time.Second

// Run runs the suite under t.Run(name). newEngine must return an engine bound to the test
// daemon that writes [dockertest.Labels] on every container it creates (docker.Config.Labels),
// so that whatever a failed test leaves behind is swept by its TestMain.
func Run(t *testing.T, name string, newEngine func(t *testing.T) docker.Engine) {
	t.Run(name, func(t *testing.T) {
		image := dockertest.Busybox(t)
		s := &suite{image: image, newEngine: newEngine}
		for _, tc := range []struct {
			name string
			fn   func(*testing.T)
		}{
			{"Bind", s.testBind},
			{"ServerOS", s.testServerOS},
			{"ImageExists", s.testImageExists},
			{"RunInspect", s.testRunInspect},
			{"RunConflict", s.testRunConflict},
			{"LabelsSelect", s.testLabelsSelect},
			{"Absent", s.testAbsent},
			{"Remove", s.testRemove},
			{"StartStopped", s.testStartStopped},
			{"PauseUnpause", s.testPauseUnpause},
			{"PauseBusy", s.testPauseBusy},
			{"Exec", s.testExec},
			{"ExecOutputLimit", s.testExecOutputLimit},
			{"ExecCancel", s.testExecCancel},
			{"ExecOutput", s.testExecOutput},
			{"CopyInStatRead", s.testCopyInStatRead},
			{"StatKinds", s.testStatKinds},
			{"ReadCap", s.testReadCap},
			{"Events", s.testEvents},
			{"Fingerprinting", s.testFingerprinting},
		} {
			t.Run(tc.name, tc.fn)
		}
	})
}

type suite struct {
	image     string
	newEngine func(t *testing.T) docker.Engine
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// Key returns a key no other test shares.
func Key(t testing.TB) sandbox.Key {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sandbox.Key{Scope: "enginetest", ThreadID: t.Name() + "-" + hex.EncodeToString(b), AgentID: "agent"}
}

// Workload creates a workload container for key with the labels and hardening a real acquire
// uses, plus opts, and returns its name and ID. Its removal is registered before the create.
func Workload(t testing.TB, e docker.Engine, image string, key sandbox.Key, opts ...docker.CreateOpt) (string, string) {
	t.Helper()
	name := docker.ContainerName(key, "busybox", "")
	labels, err := label.Workload(key, "busybox", map[string]string{"suite": "enginetest"}, "/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	all := append(docker.DefaultConfig().WorkloadOpts(), docker.WithLabels(labels...))
	spec := docker.NewCreateSpec(name, image, append(all, opts...)...)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if _, err := e.Remove(c, name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	})
	id, err := e.Run(ctx(t), spec)
	if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	return name, id
}

func (s *suite) testBind(t *testing.T) {
	e := s.newEngine(t)
	b, err := e.Bind(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if b.Context == "" || b.Endpoint == "" {
		t.Fatalf("binding %+v", b)
	}
	if again, err := e.Bind(ctx(t)); err != nil || again != b {
		t.Fatalf("second Bind = %+v, %v; want %+v", again, err, b)
	}
}

func (s *suite) testServerOS(t *testing.T) {
	os, err := s.newEngine(t).ServerOS(ctx(t))
	if err != nil || os != "linux" {
		t.Fatalf("ServerOS = %q, %v", os, err)
	}
}

func (s *suite) testImageExists(t *testing.T) {
	e := s.newEngine(t)
	cases := []struct {
		name  string
		image string
		want  bool
	}{
		{"present", s.image, true},
		{"absent", "maf-sandbox-test/absent:none", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.ImageExists(ctx(t), tc.image)
			if err != nil || got != tc.want {
				t.Fatalf("ImageExists(%s) = %v, %v; want %v", tc.image, got, err, tc.want)
			}
		})
	}
}

func (s *suite) testRunInspect(t *testing.T) {
	e := s.newEngine(t)
	key := Key(t)
	before := time.Now().Add(-time.Minute)
	name, id := Workload(t, e, s.image, key, docker.WithCapDropAll())
	info, err := e.Inspect(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != id || info.Name != name || !info.Running || info.Paused || info.Status != "running" {
		t.Fatalf("inspect %+v", info)
	}
	if info.Labels[label.Scope] != label.Value(key.Scope) || info.Labels[label.WorkDir] != "/maf-sandbox/work" ||
		info.Labels[label.UserPrefix+"suite"] != "enginetest" {
		t.Fatalf("labels %v", info.Labels)
	}
	for k, v := range dockertest.Labels() {
		if info.Labels[k] != v {
			t.Fatalf("label %s = %q, want %q: the engine's config labels are not on the container", k, info.Labels[k], v)
		}
	}
	if len(info.CapDrop) != 1 || !strings.EqualFold(info.CapDrop[0], "ALL") {
		t.Fatalf("CapDrop %v", info.CapDrop)
	}
	if info.User != "" || info.Created.Before(before) || info.Created.After(time.Now().Add(time.Minute)) {
		t.Fatalf("user %q created %v", info.User, info.Created)
	}
	if _, ok := info.Networks["none"]; !ok || len(info.Networks) != 1 {
		t.Fatalf("networks %v, want only none", info.Networks)
	}
	byID, err := e.Inspect(ctx(t), id)
	if err != nil || byID.Name != name {
		t.Fatalf("inspect by ID = %+v, %v", byID, err)
	}
}

func (s *suite) testRunConflict(t *testing.T) {
	e := s.newEngine(t)
	key := Key(t)
	name, _ := Workload(t, e, s.image, key)
	_, err := e.Run(ctx(t), docker.NewCreateSpec(name, s.image))
	if !errors.Is(err, docker.ErrConflict) {
		t.Fatalf("second run = %v, want ErrConflict", err)
	}
}

// testLabelsSelect pins both directions of the label contract: a long scope's label is
// label.Value of it, and a real listing by that value selects the container.
func (s *suite) testLabelsSelect(t *testing.T) {
	e := s.newEngine(t)
	key := Key(t)
	key.Scope = strings.Repeat("scope/with separators and length ", 4)
	key.CallID = "call 1"
	name, _ := Workload(t, e, s.image, key)
	info, err := e.Inspect(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Labels[label.Scope], label.Value(key.Scope); got != want || !strings.HasPrefix(got, "sha256-") {
		t.Fatalf("scope label %q, want %q", got, want)
	}
	kind := "busybox"
	other := "python"
	cases := []struct {
		name    string
		filters map[string]string
		nameF   string
		want    []string
	}{
		{"key", label.KeyFilter(key, nil), "", []string{name}},
		{"key and kind", label.KeyFilter(key, &kind), "", []string{name}},
		{"other kind", label.KeyFilter(key, &other), "", nil},
		{"conversation", label.ScopeFilter(key.Scope, key.ThreadID), "", []string{name}},
		{"identity presence, narrowed by name", label.IdentityFilter(""), name, []string{name}},
		{"identity with scope", label.IdentityFilter(key.Scope), "", []string{name}},
		{"other thread", label.ScopeFilter(key.Scope, key.ThreadID+"x"), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.ListNames(ctx(t), tc.filters, tc.nameF)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ListNames = %v, want %v", got, tc.want)
			}
		})
	}
}

func (s *suite) testAbsent(t *testing.T) {
	e := s.newEngine(t)
	missing := docker.ContainerName(Key(t), "busybox", "")
	c := ctx(t)
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

func (s *suite) testRemove(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	if out, err := e.Remove(ctx(t), name); err != nil || out != docker.Removed {
		t.Fatalf("Remove = %v, %v; want Removed", out, err)
	}
	if out, err := e.Remove(ctx(t), name); err != nil || out != docker.Absent {
		t.Fatalf("second Remove = %v, %v; want Absent", out, err)
	}
}

func (s *suite) testStartStopped(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t), docker.WithCmd("true"))
	waitStatus(t, e, name, "exited")
	if err := e.Pause(ctx(t), name); !errors.Is(err, docker.ErrNotRunning) {
		t.Fatalf("Pause of a stopped container = %v, want ErrNotRunning", err)
	}
	if err := e.Start(ctx(t), name); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, name, "exited")
}

func waitStatus(t *testing.T, e docker.Engine, name, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Inspect(ctx(t), name)
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

func (s *suite) testPauseUnpause(t *testing.T) {
	e := s.newEngine(t)
	name, id := Workload(t, e, s.image, Key(t))
	c := ctx(t)
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

// testPauseBusy freezes a guest busy forking and writing, over and over: cgroup v1's freezer
// then gives up now and again ("unable to freeze"). Every refusal must be ErrFreezeFailed,
// and after it an Unpause leaves the guest running. The refusal is load-dependent, so a run
// that sees none says so and passes on what it did see.
func (s *suite) testPauseBusy(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	c := ctx(t)
	busy := "for i in 1 2 3 4 5 6 7 8; do (while :; do /bin/true; done) >/dev/null 2>&1 & done; " +
		"for i in 1 2; do (while :; do dd if=/dev/zero of=/tmp/busy$i bs=64k count=16; sync; done) >/dev/null 2>&1 & done"
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", busy}}); err != nil || out.ExitCode != 0 {
		t.Fatalf("start the busy guest: %+v, %v", out, err)
	}
	t.Cleanup(func() { _ = e.Unpause(context.Background(), name) })
	refused := 0
	stop := time.Now().Add(45 * time.Second)
	for i := 0; i < 300 && refused < 2 && time.Now().Before(stop); i++ {
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
			t.Errorf("pause %d: %v; want nil or ErrFreezeFailed", i, err)
		}
		if err := e.Unpause(c, name); err != nil {
			t.Fatalf("unpause %d: %v", i, err)
		}
		if err != nil {
			if info, ierr := e.Inspect(c, name); ierr != nil || info.Paused || !info.Running {
				t.Fatalf("after a refused pause and an unpause: %+v, %v; want running", info, ierr)
			}
		}
	}
	if refused == 0 {
		t.Logf("the freezer gave up on no pause this run (it is load-dependent); nothing to classify")
	}
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"echo", "ran"}}); err != nil || string(out.Stdout) != "ran\n" {
		t.Fatalf("Exec after the loop = %+v, %v", out, err)
	}
}

func (s *suite) testExec(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	cases := []struct {
		name       string
		req        docker.ExecRequest
		wantExit   int
		wantStdout string
		wantStderr string
	}{
		{"bytes survive, invalid UTF-8 included",
			docker.ExecRequest{Argv: []string{"sh", "-c", `printf '\377\376\000\r\nA'; printf 'e\377' >&2`}},
			0, "\xff\xfe\x00\r\nA", "e\xff"},
		{"exit code", docker.ExecRequest{Argv: []string{"sh", "-c", "exit 3"}}, 3, "", ""},
		{"argv passes whole, no shell", docker.ExecRequest{Argv: []string{"printf", "%s|", "a b", "$HOME", "*"}}, 0, "a b|$HOME|*|", ""},
		{"working directory", docker.ExecRequest{WorkDir: "/etc", Argv: []string{"pwd"}}, 0, "/etc\n", ""},
		{"user", docker.ExecRequest{User: "1234:5678", Argv: []string{"id", "-u"}}, 0, "1234\n", ""},
		{"environment", docker.ExecRequest{Env: []string{"MAF_X=a b"}, Argv: []string{"sh", "-c", `printf %s "$MAF_X"`}}, 0, "a b", ""},
		{"no stdin", docker.ExecRequest{Argv: []string{"cat"}}, 0, "", ""},
		{"budget not reached", docker.ExecRequest{Argv: []string{"echo", "ok"}, MaxOutputBytes: 3}, 0, "ok\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Target = name
			out, err := e.Exec(ctx(t), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != tc.wantExit || string(out.Stdout) != tc.wantStdout || string(out.Stderr) != tc.wantStderr {
				t.Fatalf("Exec = exit %d stdout %q stderr %q; want %d %q %q", out.ExitCode, out.Stdout, out.Stderr, tc.wantExit, tc.wantStdout, tc.wantStderr)
			}
		})
	}
	t.Run("missing command is the client's 126 or 127", func(t *testing.T) {
		out, err := e.Exec(ctx(t), docker.ExecRequest{Target: name, Argv: []string{"no-such-command"}})
		if err != nil || (out.ExitCode != 126 && out.ExitCode != 127) {
			t.Fatalf("Exec = %+v, %v", out, err)
		}
	})
}

func (s *suite) testExecOutputLimit(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	for _, script := range []string{"yes", "yes >&2"} {
		start := time.Now()
		_, err := e.Exec(ctx(t), docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", script}, MaxOutputBytes: 4096})
		var le *docker.OutputLimitError
		if !errors.As(err, &le) || !errors.Is(err, docker.ErrOutputLimit) || le.Limit != 4096 {
			t.Fatalf("%s: err = %v, want an output limit error", script, err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: took %s", script, time.Since(start))
		}
	}
}

func (s *suite) testExecCancel(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"sleep", "30"}})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, docker.ErrTimeout) {
		t.Fatalf("err = %v: the caller's deadline must come back as the context's error", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
}

// testExecOutput proves that ExecRequest.Output is live without timing anything: the command
// prints, then waits for a file that a second exec creates only once the first chunk came in,
// so the exec can end only if its output arrived while it ran.
func (s *suite) testExecOutput(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	t.Run("arrives while the command runs", func(t *testing.T) {
		var (
			mu             sync.Mutex
			events         []string
			stdout, stderr bytes.Buffer
			returned       bool
		)
		note := func(ev string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		}
		seen := make(chan struct{})
		var once sync.Once
		output := func(stream int, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				t.Errorf("output called after Exec returned: %d %q", stream, p)
			}
			switch stream {
			case docker.StreamStdout:
				stdout.Write(p)
				if strings.Contains(stdout.String(), "a\n") {
					once.Do(func() { events = append(events, "first chunk"); close(seen) })
				}
			case docker.StreamStderr:
				stderr.Write(p)
			default:
				t.Errorf("stream %d", stream)
			}
		}
		touched := make(chan error, 1)
		go func() {
			select {
			case <-seen:
			case <-time.After(callTimeout):
				touched <- errors.New("no chunk came while the command ran")
				return
			}
			// Noted before the touch: the command cannot end before the file exists, but the
			// touch's own Exec may return after it has.
			note("touching")
			_, err := e.Exec(ctx(t), docker.ExecRequest{Target: name, Argv: []string{"touch", "/tmp/stream-go"}})
			touched <- err
		}()
		out, err := e.Exec(ctx(t), docker.ExecRequest{Target: name, Output: output,
			Argv: []string{"sh", "-c", `echo a; echo e >&2; while [ ! -e /tmp/stream-go ]; do sleep 0.05; done; echo b`}})
		mu.Lock()
		returned = true
		events = append(events, "returned")
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := <-touched; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"first chunk", "touching", "returned"}; strings.Join(events, ",") != strings.Join(want, ",") {
			t.Fatalf("events %q, want %q", events, want)
		}
		if string(out.Stdout) != "a\nb\n" || string(out.Stderr) != "e\n" || out.ExitCode != 0 {
			t.Fatalf("Exec = %+v", out)
		}
		if stdout.String() != string(out.Stdout) || stderr.String() != string(out.Stderr) {
			t.Fatalf("streamed stdout %q stderr %q, result %q %q", stdout.String(), stderr.String(), out.Stdout, out.Stderr)
		}
	})
	t.Run("stays within the output budget", func(t *testing.T) {
		var n atomic.Int64
		_, err := e.Exec(ctx(t), docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "yes"}, MaxOutputBytes: 4096,
			Output: func(_ int, p []byte) { n.Add(int64(len(p))) }})
		if !errors.Is(err, docker.ErrOutputLimit) {
			t.Fatalf("err = %v, want an output limit error", err)
		}
		if n.Load() > 4096 {
			t.Fatalf("streamed %d bytes over a budget of 4096", n.Load())
		}
	})
}

func (s *suite) testCopyInStatRead(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	c := ctx(t)
	content := []byte("\x00\xff\xfe not UTF-8 \r\n")
	long := "/maf-sandbox/work/" + strings.Repeat("d", 120) + "/" + strings.Repeat("f", 120)
	entries := append(docker.DirChain([]string{"/maf-sandbox", "/maf-sandbox/work"}, 10001, 20001),
		docker.FileEntry("/maf-sandbox/work/f.bin", content, 0o640, 10001, 20001),
		docker.DirEntry(long[:strings.LastIndexByte(long, '/')], 0o755, 10001, 20001),
		docker.FileEntry(long, []byte("long"), 0o644, 10001, 20001))
	tarball, err := docker.BuildTar(entries...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CopyIn(c, name, tarball); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		path string
		want docker.Entry
	}{
		{"ancestor root-owned", "/maf-sandbox", docker.Entry{Type: docker.EntryDir, Mode: 0o755, UID: 0, GID: 0}},
		{"base guest-owned", "/maf-sandbox/work", docker.Entry{Type: docker.EntryDir, Mode: 0o755, UID: 10001, GID: 20001}},
		{"file", "/maf-sandbox/work/f.bin", docker.Entry{Type: docker.EntryFile, Size: int64(len(content)), Mode: 0o640, UID: 10001, GID: 20001}},
		{"long name (extended header)", long, docker.Entry{Type: docker.EntryFile, Size: 4, Mode: 0o644, UID: 10001, GID: 20001}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Stat(ctx(t), name, tc.path)
			if err != nil || got == nil {
				t.Fatalf("Stat = %v, %v", got, err)
			}
			if got.Type != tc.want.Type || got.Size != tc.want.Size || got.Mode&0o7777 != tc.want.Mode || got.UID != tc.want.UID || got.GID != tc.want.GID {
				t.Fatalf("Stat = %+v, want %+v", *got, tc.want)
			}
		})
	}
	ent, body, err := e.Read(c, name, "/maf-sandbox/work/f.bin", int64(len(content)))
	if err != nil || ent.Type != docker.EntryFile || !bytes.Equal(body, content) {
		t.Fatalf("Read = %+v, %q, %v", ent, body, err)
	}
	// The guest sees the same bytes.
	out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"cat", "/maf-sandbox/work/f.bin"}})
	if err != nil || !bytes.Equal(out.Stdout, content) {
		t.Fatalf("guest read %q, %v", out.Stdout, err)
	}
}

func (s *suite) testStatKinds(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	c := ctx(t)
	out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c",
		"mkdir -p /t/d && echo x > /t/d/f && ln -s /etc/passwd /t/lnk && mkfifo /t/fifo && ln /t/d/f /t/hard"}})
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", out, err)
	}
	cases := []struct {
		name     string
		path     string
		wantNil  bool
		wantType docker.EntryType
		wantLink string
	}{
		{"directory", "/t/d", false, docker.EntryDir, ""},
		{"symlink is described, not followed", "/t/lnk", false, docker.EntrySymlink, "/etc/passwd"},
		{"fifo is other", "/t/fifo", false, docker.EntryOther, ""},
		{"absent", "/t/none", true, 0, ""},
		{"absent parent", "/t/none/deeper", true, 0, ""},
		{"path with a space, absent", "/t/a b", true, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Stat(ctx(t), name, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNil {
				if got != nil {
					t.Fatalf("Stat = %+v, want absence", *got)
				}
				return
			}
			if got == nil || got.Type != tc.wantType || got.LinkTarget != tc.wantLink {
				t.Fatalf("Stat = %+v, want %v -> %q", got, tc.wantType, tc.wantLink)
			}
			if got.Type != docker.EntryFile && got.Size != 0 {
				t.Fatalf("size %d reported for a %v", got.Size, got.Type)
			}
		})
	}
	t.Run("path under a file is a failure, not absence", func(t *testing.T) {
		got, err := e.Stat(ctx(t), name, "/t/d/f/x")
		if err == nil || errors.Is(err, docker.ErrPathAbsent) {
			t.Fatalf("Stat = %+v, %v", got, err)
		}
	})
	t.Run("read of a directory has no body", func(t *testing.T) {
		ent, body, err := e.Read(ctx(t), name, "/t/d", 1<<20)
		if err != nil || ent.Type != docker.EntryDir || body != nil {
			t.Fatalf("Read = %+v, %d bytes, %v", ent, len(body), err)
		}
	})
	t.Run("read of a symlink does not follow it", func(t *testing.T) {
		ent, body, err := e.Read(ctx(t), name, "/t/lnk", 1<<20)
		if err != nil || ent.Type != docker.EntrySymlink || body != nil {
			t.Fatalf("Read = %+v, %q, %v", ent, body, err)
		}
	})
	t.Run("read of an absent path", func(t *testing.T) {
		_, _, err := e.Read(ctx(t), name, "/t/none", 10)
		if !errors.Is(err, docker.ErrPathAbsent) {
			t.Fatalf("Read = %v, want ErrPathAbsent", err)
		}
	})
}

func (s *suite) testReadCap(t *testing.T) {
	e := s.newEngine(t)
	name, _ := Workload(t, e, s.image, Key(t))
	c := ctx(t)
	if out, err := e.Exec(c, docker.ExecRequest{Target: name, Argv: []string{"dd", "if=/dev/zero", "of=/big", "bs=1024", "count=1024"}}); err != nil || out.ExitCode != 0 {
		t.Fatalf("setup: %+v, %v", out, err)
	}
	start := time.Now()
	ent, body, err := e.Read(c, name, "/big", 1024)
	var ce *docker.CapExceededError
	if !errors.As(err, &ce) || ce.Size != 1<<20 || ce.Cap != 1024 || ce.Path != "/big" || body != nil {
		t.Fatalf("Read = %+v, %d bytes, %v; want the cap refused on the header", ent, len(body), err)
	}
	if ent == nil || ent.Size != 1<<20 {
		t.Fatalf("entry %+v", ent)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("refusal took %s", el)
	}
	ent, body, err = e.Read(c, name, "/big", 1<<20)
	if err != nil || len(body) != 1<<20 || ent.Size != 1<<20 {
		t.Fatalf("Read at the cap = %d bytes, %v", len(body), err)
	}
}

func (s *suite) testEvents(t *testing.T) {
	e := s.newEngine(t)
	key := Key(t)
	streamCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := e.Events(streamCtx, docker.EventFilter{
		Labels:  map[string]string{label.Thread: label.Value(key.ThreadID)},
		Actions: []string{"start", "die"},
	})
	if err != nil {
		t.Fatal(err)
	}
	name, id := Workload(t, e, s.image, key, docker.WithCmd("true"))
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for !seen["start"] || !seen["die"] {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream closed early")
			}
			if ev.Err != nil {
				t.Fatalf("stream ended: %v", ev.Err)
			}
			if ev.ID != id || ev.Name != name {
				t.Fatalf("event for %s (%s), want %s", ev.Name, ev.ID, name)
			}
			seen[ev.Action] = true
		case <-timeout:
			t.Fatalf("saw %v, want start and die", seen)
		}
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Err != nil {
				t.Fatalf("a cancelled stream reported %v", ev.Err)
			}
		case <-deadline:
			t.Fatal("the stream did not close after cancel")
		}
	}
}
