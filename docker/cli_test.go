package docker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestRunnerResults(t *testing.T) {
	c, _ := newFakeCLI(t)
	if _, err := c.Bind(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10)
	cases := []struct {
		name        string
		inv         invocation
		wantExit    int
		wantStdout  []byte
		wantStderr  []byte
		wantStopped bool
	}{
		{"bytes and exit code kept", invocation{args: []string{"bytes"}}, 3, []byte("\xff\x00\r\nA"), []byte("e\xff"), false},
		{"stdin delivered", invocation{args: []string{"stdin"}, stdin: big}, 0, big, nil, false},
		{"no stdin reads the null device", invocation{args: []string{"stdin"}}, 0, nil, nil, false},
		{"bounded read below the limit keeps the exit status", invocation{args: []string{"small"}, readLimit: 100}, 4, []byte("abc"), nil, false},
		{"bounded read stops at the limit", invocation{args: []string{"big"}, readLimit: 1024}, -1, make([]byte, 1024), nil, true},
		{"a full stderr pipe does not deadlock", invocation{args: []string{"spam-stderr"}, timeout: 10 * time.Second}, 0, []byte("ok"), make([]byte, 1<<20), false},
		{"budget not reached", invocation{args: []string{"bytes"}, maxOutput: 8}, 3, []byte("\xff\x00\r\nA"), []byte("e\xff"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res, err := c.run(context.Background(), tc.inv)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.wantExit || res.Stopped != tc.wantStopped {
				t.Fatalf("exit %d stopped %v, want %d %v (stderr %q)", res.ExitCode, res.Stopped, tc.wantExit, tc.wantStopped, res.Stderr)
			}
			if !bytes.Equal(res.Stdout, tc.wantStdout) || !bytes.Equal(res.Stderr, tc.wantStderr) {
				t.Fatalf("stdout %d bytes %q…, stderr %d bytes; want %d and %d", len(res.Stdout), head(res.Stdout), len(res.Stderr), len(tc.wantStdout), len(tc.wantStderr))
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
			waitNoChildren(t)
		})
	}
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

func TestRunnerAbnormalEnds(t *testing.T) {
	c, _ := newFakeCLI(t)
	if _, err := c.Bind(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const sleeper = "sleep\x0030.123"
	cases := []struct {
		name      string
		inv       invocation
		ctx       func() (context.Context, context.CancelFunc)
		wantErr   error
		notErr    error
		wantLimit bool
	}{
		{"own timeout is a TimeoutError", invocation{args: []string{"sleep"}, timeout: 300 * time.Millisecond},
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			ErrTimeout, context.DeadlineExceeded, false},
		{"caller cancellation is the context's error", invocation{args: []string{"sleep"}, timeout: 20 * time.Second},
			func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(300*time.Millisecond, cancel)
				return ctx, cancel
			}, context.Canceled, ErrTimeout, false},
		{"caller deadline is the context's error, not a timeout", invocation{args: []string{"sleep"}, timeout: 20 * time.Second},
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 300*time.Millisecond)
			}, context.DeadlineExceeded, ErrTimeout, false},
		{"exec without own timeout ends with ctx", invocation{args: []string{"sleep"}},
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 300*time.Millisecond)
			}, context.DeadlineExceeded, ErrTimeout, false},
		{"a grandchild holding the pipes cannot hang the call", invocation{args: []string{"orphan"}, timeout: 500 * time.Millisecond},
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			ErrTimeout, nil, false},
		{"stdout over budget", invocation{args: []string{"big"}, maxOutput: 1000},
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			ErrOutputLimit, nil, true},
		{"stderr counts against the budget", invocation{args: []string{"spam-stderr"}, maxOutput: 1000},
			func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			ErrOutputLimit, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			_, err := c.run(ctx, tc.inv)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.notErr != nil && errors.Is(err, tc.notErr) {
				t.Fatalf("err = %v also matches %v", err, tc.notErr)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("took %s: the child was not killed promptly", el)
			}
			var le *OutputLimitError
			if tc.wantLimit && (!errors.As(err, &le) || le.Limit != tc.inv.maxOutput) {
				t.Fatalf("err = %#v, want the budget in an *OutputLimitError", err)
			}
			waitNoChildren(t)
			if left := processesWithCmdline(t, sleeper); len(left) > 0 {
				t.Fatalf("the client's process group survived: %v", left)
			}
		})
	}
}

func TestRunnerTimeoutMessage(t *testing.T) {
	c, _ := newFakeCLI(t)
	_, err := c.run(context.Background(), invocation{args: []string{"sleep"}, timeout: 100 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Timeout != 100*time.Millisecond || te.Args[0] != "sleep" {
		t.Fatalf("err = %#v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("own timeout reported as a bare context deadline")
	}
}

func TestRunnerCancelledBeforeStart(t *testing.T) {
	c, logPath := newFakeCLI(t)
	if _, err := c.Bind(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.run(ctx, invocation{args: []string{"small"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if log := readLog(t, logPath); len(log) != 1 {
		t.Fatalf("a cancelled call spawned a client: %v", log)
	}
}

func TestRunnerConcurrentBoundedReads(t *testing.T) {
	c, _ := newFakeCLI(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				res, err := c.run(context.Background(), invocation{args: []string{"big"}, readLimit: 512, timeout: 10 * time.Second})
				if err != nil {
					errs <- err
					return
				}
				if len(res.Stdout) != 512 || !res.Stopped {
					errs <- errors.New("bounded read did not stop at its limit")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitNoChildren(t)
}

func TestBinding(t *testing.T) {
	cases := []struct {
		name        string
		env         []string
		wantErr     error
		wantMessage string
		wantContext string
		wantHost    string // DOCKER_HOST a later command sees
	}{
		{"named context leaves DOCKER_HOST alone", []string{"DOCKER_HOST=tcp://snap:1"}, nil, "", "fake", "tcp://snap:1"},
		{"default context pins DOCKER_HOST", []string{"DOCKER_HOST=",
			`FAKE_CONTEXT_JSON={"Name":"default","Endpoints":{"docker":{"Host":"unix:///pinned.sock"}}}`}, nil, "", "default", "unix:///pinned.sock"},
		// The API driver refuses an ssh:// endpoint (TestAPIDriverBinding); the CLI binds it and
		// leaves the dialing to the client.
		{"ssh context is the client's to dial", []string{"DOCKER_HOST=",
			`FAKE_CONTEXT_JSON={"Name":"remote","Endpoints":{"docker":{"Host":"ssh://me@host"}}}`}, nil, "", "remote", ""},
		{"null", []string{"FAKE_CONTEXT_JSON=null"}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"array", []string{`FAKE_CONTEXT_JSON=[{"Name":"x"}]`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"not JSON", []string{"FAKE_CONTEXT_JSON=hello"}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"empty name", []string{`FAKE_CONTEXT_JSON={"Name":"","Endpoints":{"docker":{"Host":"unix:///x"}}}`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"name not a string", []string{`FAKE_CONTEXT_JSON={"Name":7,"Endpoints":{"docker":{"Host":"unix:///x"}}}`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"no endpoint", []string{`FAKE_CONTEXT_JSON={"Name":"x","Endpoints":{}}`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"empty host", []string{`FAKE_CONTEXT_JSON={"Name":"x","Endpoints":{"docker":{"Host":""}}}`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"client fails", []string{"FAKE_CONTEXT_EXIT=1", "FAKE_CONTEXT_JSON=", `FAKE_CONTEXT_STDERR=context "gone": context not found`},
			ErrUnreachable, "could not resolve its context", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, logPath := newFakeCLI(t, tc.env...)
			// The live environment changes after construction; the CLI must not see it.
			t.Setenv("DOCKER_HOST", "tcp://live:2")
			b, err := c.Bind(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Bind err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if !strings.Contains(err.Error(), tc.wantMessage) {
					t.Fatalf("message %q lacks %q", err, tc.wantMessage)
				}
				// Refused before any daemon command.
				if _, err := c.run(context.Background(), invocation{args: []string{"small"}}); err == nil {
					t.Fatal("a command ran on an unbound CLI")
				}
				for _, line := range readLog(t, logPath) {
					if !strings.Contains(line, " context inspect ") {
						t.Fatalf("non-binding command issued: %q", line)
					}
				}
				return
			}
			if b.Context != tc.wantContext {
				t.Fatalf("context %q, want %q", b.Context, tc.wantContext)
			}
			if _, err := c.run(context.Background(), invocation{args: []string{"small"}}); err != nil {
				t.Fatal(err)
			}
			log := readLog(t, logPath)
			if len(log) != 2 {
				t.Fatalf("log %q", log)
			}
			if want := "DOCKER_HOST=" + tc.wantHost + " --context " + tc.wantContext + " small"; log[1] != want {
				t.Fatalf("later command %q, want %q", log[1], want)
			}
			if !strings.HasSuffix(log[0], " context inspect --format {{json .}}") || strings.Contains(log[0], "--context") {
				t.Fatalf("binding command %q", log[0])
			}
		})
	}
}

func TestBindingSingleFlight(t *testing.T) {
	c, logPath := newFakeCLI(t, "FAKE_CONTEXT_DELAY=0.3")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Bind(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if log := readLog(t, logPath); len(log) != 1 {
		t.Fatalf("%d context inspects under concurrent first use: %v", len(log), log)
	}
}

func TestBindingRetriesAfterFailure(t *testing.T) {
	c, logPath := newFakeCLI(t, "FAKE_CONTEXT_EXIT=1")
	if _, err := c.Bind(context.Background()); err == nil {
		t.Fatal("bound although the client failed")
	}
	if _, err := c.Bind(context.Background()); err == nil {
		t.Fatal("bound although the client failed")
	}
	if log := readLog(t, logPath); len(log) != 2 {
		t.Fatalf("a failed binding was not retried: %v", log)
	}
}

func TestClientNotFound(t *testing.T) {
	cases := []struct {
		name string
		path string
	}{
		{"name not on PATH", "no-such-docker-client"},
		{"missing path", "/nonexistent/docker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newCLIDriver(Config{DockerPath: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Inspect(context.Background(), "x")
			if !errors.Is(err, ErrClientNotFound) || !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "Config.DockerPath") {
				t.Fatalf("message %q does not name the path and the setting", err)
			}
		})
	}
}
