package lifecycle

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// socketRelay forwards a unix socket to the daemon's, and can be cut like a daemon going away.
type socketRelay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// newSocketRelay relays to target; up, when set, carries each connection's client side (nil:
// a plain copy).
func newSocketRelay(t *testing.T, target string, up func(dst io.Writer, src io.Reader)) *socketRelay {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r := &socketRelay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, d)
			r.mu.Unlock()
			itest.Relay(&r.wg, c, d, up)
		}
	}()
	t.Cleanup(r.cut)
	return r
}

// cut closes the socket and every relayed connection: the daemon is unreachable from here on.
func (r *socketRelay) cut() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// relayTheDaemon puts a relay of the daemon's socket in DOCKER_HOST for the test.
func relayTheDaemon(t *testing.T) *socketRelay {
	relay := newSocketRelay(t, "/var/run/docker.sock", nil)
	t.Setenv("DOCKER_HOST", "unix://"+relay.ln.Addr().String())
	t.Setenv("DOCKER_CONTEXT", "")
	return relay
}

// acquireThroughRelay acquires a files sandbox on b (made behind the relay), runs a first
// command, and disposes of it at the end through a backend on the real socket.
func acquireThroughRelay(t *testing.T, b *actors.Backend) (sandbox.Key, sandbox.Spec, sandbox.Sandbox) {
	t.Helper()
	key, spec := itest.NewKey(t), itest.FilesSpec(t)
	sb, err := b.Acquire(itest.Context(t), key, spec)
	t.Cleanup(func() {
		t.Setenv("DOCKER_HOST", "") // the relay is cut by then
		itest.NewBackend(t).Dispose(context.Background(), key, sandbox.DisposeOptions{})
	})
	if err != nil {
		t.Fatalf("acquire through the relay: %v", err)
	}
	itest.Sh(t, sb, "true")
	return key, spec, sb
}

// The daemon's socket made unreachable mid-run: calls fail with the unreachable class —
// never "absent" — promptly, and nothing is left running on the host side. On the archive
// plane, where every file call is a daemon call: the host plane reaches a container it
// proved at acquire through the process's root, not through the daemon.
func TestDaemonUnreachableMidRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	relay := relayTheDaemon(t)
	// docker exec, the path through the daemon: a command on the exec channel reaches the
	// proven supervisor without it, and its answer is the program's own
	// (TestExecChannelAnswersWithTheDaemonGone).
	b := itest.NewBackend(t, actors.WithFilePlane(actors.FilePlaneArchive), actors.WithExecChannel(nil))
	key, spec, sb := acquireThroughRelay(t, b)
	// A guest that prints the client's words is still the guest: the daemon answers.
	forged, err := sb.Exec(itest.Context(t), sandbox.Shell("echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2; exit 1"), ".", 10*time.Second)
	if err != nil || forged.ExitCode != 1 {
		t.Fatalf("a guest printing the unreachable line = %+v, %v; want its own result", forged, err)
	}
	relay.cut()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Every call says the daemon is gone, typed, never as a result of the guest's: an exec's
	// client that cannot reach the daemon is not the program failing.
	var ua *sandbox.BackendUnavailableError
	st, err := sb.StatFile(ctx, "x", ".")
	if !errors.Is(err, docker.ErrUnreachable) || !errors.As(err, &ua) || st != nil {
		t.Fatalf("stat with the daemon gone = %+v, %v; want BackendUnavailableError of the unreachable class", st, err)
	}
	if err := sb.WriteFile(ctx, "x", []byte("x"), "."); !errors.As(err, &ua) {
		t.Fatalf("write with the daemon gone = %v; want BackendUnavailableError", err)
	}
	if res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", 10*time.Second); !errors.As(err, &ua) {
		t.Fatalf("exec with the daemon gone = %+v, %v; want BackendUnavailableError, never a result", res, err)
	}
	if err := sb.Remove(ctx, "x", ".", false); !errors.As(err, &ua) {
		t.Fatalf("remove with the daemon gone = %v; want BackendUnavailableError", err)
	}
	if _, err := b.Acquire(ctx, key, spec); err == nil {
		t.Fatal("acquire with the daemon gone must fail")
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f == nil || f.Code != sandbox.DisposalUnlisted && f.Code != sandbox.DisposalUnreachable {
		t.Fatalf("dispose with the daemon gone = %v, want unlisted or unreachable", f)
	}
	b.Close(context.Background())
}

// The daemon's socket made unreachable under a sandbox whose commands take the exec channel:
// the channel was proved while the daemon answered and reaches the supervisor through the
// process's root, not the daemon, so a command still runs and its answer is the program's
// own (its output and exit status), while a call that needs the daemon says it is gone.
func TestExecChannelAnswersWithTheDaemonGone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	relay := relayTheDaemon(t)
	b, eng := itest.NewCountingBackend(t, actors.WithFilePlane(actors.FilePlaneArchive), actors.WithExecChannel(itest.ExecSupervisor(t)))
	_, _, sb := acquireThroughRelay(t, b)
	eng.Reset()
	relay.cut()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.Shell("echo ran; exit 7"), ".", 10*time.Second)
	if err != nil || res.ExitCode != 7 || string(res.StdoutBytes) != "ran\n" {
		t.Fatalf("exec on the channel with the daemon gone = %+v, %v; want the program's own answer (ran, 7)", res, err)
	}
	if slices.Contains(eng.Seen(), "exec") {
		t.Fatalf("the command went through docker exec (%v), not the channel", eng.Seen())
	}
	var ua *sandbox.BackendUnavailableError
	if st, err := sb.StatFile(ctx, "x", "."); !errors.As(err, &ua) || st != nil {
		t.Fatalf("stat with the daemon gone = %+v, %v; want BackendUnavailableError", st, err)
	}
	b.Close(context.Background())
}
