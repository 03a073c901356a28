package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/messages"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// badInputCase is one call no engine could carry out as asked, and the rule its refusal names.
type badInputCase struct {
	name string
	call func(sb sandbox.Sandbox) error
	rule string
}

func badInputCases(t *testing.T) []badInputCase {
	ctx := itest.Context(t)
	exec := func(cmd sandbox.Command, wd string) func(sandbox.Sandbox) error {
		return func(sb sandbox.Sandbox) error {
			res, err := sb.Exec(ctx, cmd, wd, time.Minute)
			if err == nil {
				t.Errorf("exec answered a result (exit %d, stdout %q)", res.ExitCode, res.Stdout())
			}
			return err
		}
	}
	write := func(p string) func(sandbox.Sandbox) error {
		return func(sb sandbox.Sandbox) error { return sb.WriteFile(ctx, p, []byte("x"), ".") }
	}
	stat := func(p string) func(sandbox.Sandbox) error {
		return func(sb sandbox.Sandbox) error { _, err := sb.StatFile(ctx, p, "."); return err }
	}
	read := func(p string) func(sandbox.Sandbox) error {
		return func(sb sandbox.Sandbox) error { _, err := sb.ReadFile(ctx, p, ".", 1<<20); return err }
	}
	component := strings.Repeat("c", 4096)
	fiveKiB := strings.Repeat("d/", 2560) + "f"
	return []badInputCase{
		{"exec argv with a NUL", exec(sandbox.Argv("sh", "-c", "touch ran\x00"), "."), "NUL byte"},
		{"exec shell with a NUL", exec(sandbox.Shell("touch ran\x00x"), "."), "NUL byte"},
		{"exec working directory with a NUL", exec(sandbox.Shell("touch ran"), "sub\x00"), "NUL byte"},
		{"exec working directory too long", exec(sandbox.Shell("touch ran"), fiveKiB), "PATH_MAX"},
		{"write path with a NUL", write("ran\x00x"), "NUL byte"},
		{"write a 4096-character component", write(component), "PATH_MAX"},
		{"write a 300-byte component", write(strings.Repeat("n", 300)), "NAME_MAX"},
		{"write a 5 KiB path", write(fiveKiB), "PATH_MAX"},
		{"write with a trailing slash", write("ran/"), `ends in "/"`},
		{"stat path with a NUL", stat("ran\x00"), "NUL byte"},
		{"stat a 4096-character component", stat(component), "PATH_MAX"},
		{"stat a 5 KiB path", stat(fiveKiB), "PATH_MAX"},
		{"read path with a NUL", read("ran\x00"), "NUL byte"},
		{"read a 5 KiB path", read(fiveKiB), "PATH_MAX"},
		{"remove path with a NUL", func(sb sandbox.Sandbox) error { return sb.Remove(ctx, "ran\x00", ".", false) }, "NUL byte"},
	}
}

// TestBadInputRefusedBeforeTheEngine: a NUL byte in argv, a shell string or a working
// directory, and a path no Linux call could take, are invalid arguments naming the rule,
// raised before any engine call, on the driver under test.
func TestBadInputRefusedBeforeTheEngine(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b, eng := itest.NewCountingBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete)))
		for _, tc := range badInputCases(t) {
			t.Run(tc.name, func(t *testing.T) {
				eng.Reset()
				err := tc.call(sb)
				var inv *sandbox.InvalidArgumentError
				if !errors.As(err, &inv) || !errors.Is(err, sandbox.ErrInvalid) {
					t.Fatalf("err = %T %v, want *sandbox.InvalidArgumentError", err, err)
				}
				if !strings.Contains(err.Error(), tc.rule) {
					t.Fatalf("err = %q, want it to name %q", err, tc.rule)
				}
				if calls := eng.Seen(); len(calls) != 0 {
					t.Fatalf("the refusal came after engine calls %v", calls)
				}
			})
		}
		res, err := sb.Exec(itest.Context(t), sandbox.Shell("ls -A; true"), ".", time.Minute)
		if err != nil || strings.TrimSpace(res.Stdout()) != "" {
			t.Fatalf("something ran or was written: %q, %v", res.Stdout(), err)
		}
	})
}

// TestServiceBadInputRefusedBeforeTheEngine is the same over NATS: the reply's code is
// invalid_argument, and the engine was not called.
func TestServiceBadInputRefusedBeforeTheEngine(t *testing.T) {
	b, eng := itest.NewCountingBackend(t)
	srv := natstest.Run(t)
	svc, _ := itest.ServeBackend(t, srv, b)
	c := (&itest.NATSEngine{Server: srv, Backend: b, Service: svc}).Remote(t)
	sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete)))
	if _, ok := sb.(*client.Sandbox); !ok {
		t.Fatalf("acquired %T, want the client's sandbox", sb)
	}
	for _, tc := range badInputCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			eng.Reset()
			err := tc.call(sb)
			var remote *messages.RemoteError
			if !errors.As(err, &remote) || remote.Code != messages.CodeInvalidArgument {
				t.Fatalf("err = %T %v, want code %s", err, err, messages.CodeInvalidArgument)
			}
			var inv *sandbox.InvalidArgumentError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.rule) {
				t.Fatalf("err = %v, want an invalid argument naming %q", err, tc.rule)
			}
			if calls := eng.Seen(); len(calls) != 0 {
				t.Fatalf("the refusal came after engine calls %v", calls)
			}
		})
	}
}
