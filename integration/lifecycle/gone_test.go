package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// goneCalls are the calls of a handle whose sandbox no longer exists; each must fail with
// *sandbox.GoneError, never with a result.
func goneCalls(t *testing.T) map[string]func(sandbox.Sandbox) error {
	ctx := itest.Context(t)
	return map[string]func(sandbox.Sandbox) error{
		"exec": func(sb sandbox.Sandbox) error {
			res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
			if err == nil || res.ExitCode != 0 || len(res.StderrBytes) != 0 {
				t.Errorf("exec answered a result: exit %d, stderr %q", res.ExitCode, res.StderrBytes)
			}
			return err
		},
		"write":  func(sb sandbox.Sandbox) error { return sb.WriteFile(ctx, "f", []byte("x"), ".") },
		"stat":   func(sb sandbox.Sandbox) error { _, err := sb.StatFile(ctx, "f", "."); return err },
		"read":   func(sb sandbox.Sandbox) error { _, err := sb.ReadFile(ctx, "f", ".", 1<<20); return err },
		"remove": func(sb sandbox.Sandbox) error { return sb.Remove(ctx, "f", ".", false) },
	}
}

func wantGone(t *testing.T, err error) {
	t.Helper()
	var g *sandbox.GoneError
	if !errors.As(err, &g) || !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("err = %T %v, want *sandbox.GoneError", err, err)
	}
}

// TestGoneAfterExecTimeout: the timeout says it discarded the sandbox, and every later call on
// the handle is GoneError, never the daemon's "No such container" dressed as a result.
func TestGoneAfterExecTimeout(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete)))
	_, err := sb.Exec(itest.Context(t), sandbox.Argv("sleep", "30"), ".", time.Second)
	var te *sandbox.TimeoutError
	if !errors.As(err, &te) || !te.Discarded {
		t.Fatalf("exec = %v, want a timeout that discarded the sandbox", err)
	}
	for name, call := range goneCalls(t) {
		t.Run(name, func(t *testing.T) { wantGone(t, call(sb)) })
	}
}

// TestGoneRemovedBehindTheEngine: a container removed with docker rm -f answers each call's
// first contact with the engine as GoneError, on the driver under test.
func TestGoneRemovedBehindTheEngine(t *testing.T) {
	b := itest.NewBackend(t)
	for name, call := range goneCalls(t) {
		t.Run(name, func(t *testing.T) {
			sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete)))
			removeBehind(t, sb.InstanceID())
			wantGone(t, call(sb))
			wantGone(t, call(sb)) // and again, now from what the actor remembers
		})
	}
}

// TestGoneReplaced: the handle of an instance a later acquire replaced is gone, and its
// calls never land in the successor.
func TestGoneReplaced(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	old := itest.Acquire(t, b, key, spec)
	removeBehind(t, old.InstanceID())
	var successor sandbox.Sandbox
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if successor = itest.Acquire(t, b, key, spec); successor.InstanceID() != old.InstanceID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("acquire kept handing out the removed instance")
		}
	}
	for name, call := range goneCalls(t) {
		t.Run(name, func(t *testing.T) {
			err := call(old)
			wantGone(t, err)
			if name != "write" && name != "exec" {
				return
			}
			if st, err := successor.StatFile(itest.Context(t), "f", "."); err != nil || st != nil {
				t.Fatalf("the old handle's %s landed in the successor: %v, %v", name, st, err)
			}
		})
	}
}

// TestGoneIsConfirmed: a program that prints the daemon's answer for its own container and
// exits 1 gets its result back; the answer alone proves nothing.
func TestGoneIsConfirmed(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	line := "Error response from daemon: No such container: " + sb.InstanceID()
	res, err := sb.Exec(itest.Context(t), sandbox.Argv("sh", "-c", `echo "$1" >&2; exit 1`, "sh", line), ".", time.Minute)
	if err != nil || res.ExitCode != 1 || strings.TrimSpace(res.Stderr()) != line {
		t.Fatalf("exec = exit %d, stderr %q, %v; want the program's own result", res.ExitCode, res.Stderr(), err)
	}
	if _, err := sb.Exec(itest.Context(t), sandbox.Argv("true"), ".", time.Minute); err != nil {
		t.Fatalf("the sandbox was taken for gone: %v", err)
	}
}

// TestServiceGone: over NATS, a gone sandbox answers sandbox_gone, health stops counting it
// as soon as the engine knows, and later calls on the handle still say sandbox_gone.
func TestServiceGone(t *testing.T) {
	b := itest.NewBackend(t)
	srv := natstest.Run(t)
	svc, _ := itest.ServeBackend(t, srv, b)
	c := (&itest.NATSEngine{Server: srv, Backend: b, Service: svc}).Remote(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	ctx := itest.Context(t)
	sandboxes := func() int {
		t.Helper()
		h, err := c.Health(ctx)
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return h.Sandboxes
	}
	wantCode := func(t *testing.T, err error, code string) {
		t.Helper()
		var remote *messages.RemoteError
		if !errors.As(err, &remote) || remote.Code != code {
			t.Fatalf("err = %T %v, want code %s", err, err, code)
		}
	}

	t.Run("exec timeout", func(t *testing.T) {
		sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), spec)
		before := sandboxes()
		_, err := sb.Exec(ctx, sandbox.Argv("sleep", "30"), ".", time.Second)
		wantCode(t, err, messages.CodeTimeout)
		var te *sandbox.TimeoutError
		if !errors.As(err, &te) || !te.Discarded {
			t.Fatalf("exec = %v, want a timeout that discarded the sandbox", err)
		}
		if n := sandboxes(); n != before-1 {
			t.Fatalf("health counts %d sandboxes after the discard, want %d", n, before-1)
		}
		for name, call := range goneCalls(t) {
			t.Run(name, func(t *testing.T) {
				err := call(sb)
				wantCode(t, err, messages.CodeSandboxGone)
				wantGone(t, err)
			})
		}
	})
	t.Run("default output cap", func(t *testing.T) {
		sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), spec)
		before := sandboxes()
		_, err := sb.Exec(ctx, sandbox.Shell("head -c 9000000 /dev/zero"), ".", time.Minute)
		wantCode(t, err, messages.CodeExecOutputLimitExceeded)
		var oe *sandbox.ExecOutputLimitExceededError
		if !errors.As(err, &oe) || !oe.Discarded {
			t.Fatalf("exec = %v, want an overflow that discarded the sandbox", err)
		}
		if n := sandboxes(); n != before-1 {
			t.Fatalf("health counts %d sandboxes after the discard, want %d", n, before-1)
		}
		_, err = sb.StatFile(ctx, "f", ".")
		wantCode(t, err, messages.CodeSandboxGone)
	})
	t.Run("removed behind the engine", func(t *testing.T) {
		sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), spec)
		before := sandboxes()
		removeBehind(t, sb.InstanceID())
		err := sb.WriteFile(ctx, "f", []byte("x"), ".")
		wantCode(t, err, messages.CodeSandboxGone)
		if n := sandboxes(); n != before-1 {
			t.Fatalf("health counts %d sandboxes after the gone reply, want %d", n, before-1)
		}
		_, err = sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
		wantCode(t, err, messages.CodeSandboxGone)
	})
}

// removeBehind removes a container the way an operator would, outside the engine.
func removeBehind(t *testing.T, id string) {
	t.Helper()
	dockertest.Docker(t, "rm", "-f", id)
}
