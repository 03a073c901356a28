package docker_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

func TestEngineExec(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
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
			out, err := e.Exec(testCtx(t), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if out.ExitCode != tc.wantExit || string(out.Stdout) != tc.wantStdout || string(out.Stderr) != tc.wantStderr {
				t.Fatalf("Exec = exit %d stdout %q stderr %q; want %d %q %q", out.ExitCode, out.Stdout, out.Stderr, tc.wantExit, tc.wantStdout, tc.wantStderr)
			}
		})
	}
	// What the runtime could not start is an ExecStartError, never a result; what a program
	// that ran answered, 126 and 127 included, stays a result.
	notStarted := []struct {
		name string
		req  docker.ExecRequest
		want sandbox.StartFailure
	}{
		{"missing command", docker.ExecRequest{Argv: []string{"no-such-command"}}, sandbox.StartNoProgram},
		{"missing binary by path", docker.ExecRequest{Argv: []string{"/no/such/binary"}}, sandbox.StartNoProgram},
		{"missing working directory", docker.ExecRequest{WorkDir: "/no/such/dir", Argv: []string{"echo", "ok"}}, sandbox.StartWorkDir},
		{"not executable", docker.ExecRequest{Argv: []string{"/etc/passwd"}}, sandbox.StartPermission},
	}
	for _, tc := range notStarted {
		t.Run(tc.name+" is not started", func(t *testing.T) {
			tc.req.Target = name
			out, err := e.Exec(testCtx(t), tc.req)
			var se *docker.ExecStartError
			if !errors.As(err, &se) || !errors.Is(err, docker.ErrExecNotStarted) || se.Cause != tc.want {
				t.Fatalf("Exec = %+v, %v; want an ExecStartError (%s)", out, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		script string
		code   int
	}{
		{"exit 127", "exit 127", 127},
		{"exit 126", "exit 126", 126},
		{"sh's not found", "no-such-command", 127},
		{"the runtime's words printed", `printf 'OCI runtime exec failed: exec failed: unable to start container process: exec: "x": executable file not found in $PATH: unknown\n'; exit 126`, 126},
	} {
		t.Run(tc.name+" is a result", func(t *testing.T) {
			out, err := e.Exec(testCtx(t), docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", tc.script}})
			if err != nil || out.ExitCode != tc.code {
				t.Fatalf("Exec = %+v, %v; want the result %d", out, err, tc.code)
			}
		})
	}
}

func TestEngineExecOutputLimit(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
	for _, script := range []string{"yes", "yes >&2"} {
		start := time.Now()
		_, err := e.Exec(testCtx(t), docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", script}, MaxOutputBytes: 4096})
		var le *docker.OutputLimitError
		if !errors.As(err, &le) || !errors.Is(err, docker.ErrOutputLimit) || le.Limit != 4096 {
			t.Fatalf("%s: err = %v, want an output limit error", script, err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: took %s", script, time.Since(start))
		}
	}
}

func TestEngineExecCancel(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
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

// TestEngineExecOutput proves that ExecRequest.Output is live without timing anything: the command
// prints, then waits for a file that a second exec creates only once the first chunk came in,
// so the exec can end only if its output arrived while it ran.
func TestEngineExecOutput(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	name, _ := workload(t, e, image, testKey(t))
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
			_, err := e.Exec(testCtx(t), docker.ExecRequest{Target: name, Argv: []string{"touch", "/tmp/stream-go"}})
			touched <- err
		}()
		out, err := e.Exec(testCtx(t), docker.ExecRequest{Target: name, Output: output,
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
		_, err := e.Exec(testCtx(t), docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "yes"}, MaxOutputBytes: 4096,
			Output: func(_ int, p []byte) { n.Add(int64(len(p))) }})
		if !errors.Is(err, docker.ErrOutputLimit) {
			t.Fatalf("err = %v, want an output limit error", err)
		}
		if n.Load() > 4096 {
			t.Fatalf("streamed %d bytes over a budget of 4096", n.Load())
		}
	})
}
