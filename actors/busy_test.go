package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// An acquire-time probe that could not run says the daemon is busy or unreachable — typed,
// and retryable on the wire — never that the image lacks a capability; one the image answered
// (a status, or a program the runtime could not start) is the capability refusal.
func TestProbeThatCouldNotRunIsNoCapabilityRefusal(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name        string
		out         docker.ExecOutput
		err         error
		unsupported bool // else busy
	}{
		{"the client's own budget", docker.ExecOutput{}, &docker.TimeoutError{Args: []string{"exec"}, Timeout: 10 * time.Second}, false},
		{"the probe's deadline", docker.ExecOutput{}, fmt.Errorf("docker exec: %w", context.DeadlineExceeded), false},
		{"an unreachable daemon", docker.ExecOutput{}, &docker.CommandError{Args: []string{"exec"}, ExitCode: 1, Class: docker.ErrUnreachable}, false},
		{"a pause by another party", docker.ExecOutput{}, &docker.CommandError{Args: []string{"exec"}, ExitCode: 1, Class: docker.ErrPaused}, false},
		{"no sh in the image", docker.ExecOutput{ExitCode: 126}, &docker.ExecStartError{Args: []string{"exec"}, Cause: sandbox.StartNoProgram,
			Message: `OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`}, true},
		{"a failing sh", docker.ExecOutput{ExitCode: 2}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine()
			f.onExec = func(_ context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
				if len(req.Argv) == 3 && req.Argv[0] == "sh" && req.Argv[2] == "exit 0" {
					return tc.out, tc.err
				}
				return docker.ExecOutput{}, nil
			}
			b := newTestBackend(t, f)
			defer b.Close(context.Background())
			_, err := b.Acquire(context.Background(), testKey, testSpec(t))
			var ua *sandbox.BackendUnavailableError
			code := messages.EncodeError(err).Code
			switch {
			case tc.unsupported && (!errors.Is(err, sandbox.ErrUnsupported) || code != messages.CodeCapabilityNotSupported):
				t.Fatalf("acquire = %v (%s); want a capability refusal", err, code)
			case !tc.unsupported && (!errors.As(err, &ua) || errors.Is(err, sandbox.ErrUnsupported) || code != messages.CodeEngineUnavailable):
				t.Fatalf("acquire = %v (%s); want BackendUnavailableError, engine_unavailable", err, code)
			case !tc.unsupported && !errors.Is(err, tc.err):
				t.Fatalf("acquire = %v; want the driver's error inside", err)
			}
		})
	}
}

// A probe the runtime could not start because the container's first process had already
// ended says so, with how it ended: the refusal does not just blame the image's commands.
func TestProbeOnAStoppedContainerSaysItStopped(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	f.onExec = func(_ context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
		c := f.find(req.Target)
		code := 127
		f.mu.Lock()
		c.running, c.exited = false, &code
		f.mu.Unlock()
		return docker.ExecOutput{ExitCode: 126}, &docker.ExecStartError{Args: []string{"exec"}, Cause: sandbox.StartRuntime,
			Message: "OCI runtime exec failed: exec failed: cannot exec in a stopped container: unknown"}
	}
	b := newTestBackend(t, f)
	defer b.Close(context.Background())
	_, err := b.Acquire(context.Background(), testKey, testSpec(t))
	if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "the container had stopped: status exited, exit code 127") {
		t.Fatalf("acquire = %v; want the refusal to say the container had stopped and how", err)
	}
}

// A start that outlived the engine's command timeout is a typed timeout the client may retry:
// errors.Is(err, docker.ErrTimeout) inside a BackendUnavailableError, engine_unavailable on the
// wire — never an untyped "docker start …: exceeded".
func TestStartThatTimedOutIsBusy(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newFakeEngine()
	f.onStart = func(target string) error {
		return &docker.TimeoutError{Args: []string{"start", target}, Timeout: 30 * time.Second}
	}
	b := newTestBackend(t, f)
	defer b.Close(context.Background())
	_, err := b.Acquire(context.Background(), testKey, testSpec(t))
	var ua *sandbox.BackendUnavailableError
	var te *docker.TimeoutError
	if !errors.As(err, &ua) || !errors.As(err, &te) || !errors.Is(err, docker.ErrTimeout) {
		t.Fatalf("acquire = %v; want BackendUnavailableError around docker's TimeoutError", err)
	}
	if code := messages.EncodeError(err).Code; code != messages.CodeEngineUnavailable {
		t.Fatalf("wire code %s, want engine_unavailable", code)
	}
	var remote *messages.EngineUnavailableError
	if !errors.As(messages.DecodeError(messages.EncodeError(err)), &remote) {
		t.Fatalf("the client does not rebuild an EngineUnavailableError, which it retries")
	}
}
