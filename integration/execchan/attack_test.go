package execchan

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// Each test below is a root guest attacking the exec channel of its own sandbox; the
// sandbox's commands are the guest (busybox runs them as root). docs/architecture.md, "The
// exec channel", states what each defends.

// TestExecChannelSurvivesSignalsToItsSupervisor: every signal a guest can send PID 1 leaves
// the supervisor serving. Defence: it handles every catchable signal (Go's own handlers would
// exit on SIGTERM, SIGINT, SIGHUP...), and the kernel drops SIGKILL and SIGSTOP sent to a
// namespace's init from inside.
func TestExecChannelSurvivesSignalsToItsSupervisor(t *testing.T) {
	sb, eng := channelSandbox(t)
	var kills []string
	for sig := 1; sig <= 31; sig++ {
		kills = append(kills, "kill -"+itoa(sig)+" 1 2>/dev/null")
	}
	run(t, sb, sandbox.Shell(strings.Join(kills, "; ")+"; true"))
	eng.Reset()
	r := run(t, sb, sandbox.Shell("cat /proc/1/cmdline | tr '\\0' ' '"))
	onChannel(t, eng)
	if !strings.HasPrefix(string(r.StdoutBytes), execwire.Binary+" ") {
		t.Fatalf("PID 1 is now %q, not the supervisor", r.StdoutBytes)
	}
}

// TestExecChannelRefusesALinkToAHostSocket: the guest puts a symbolic link to a socket of the
// host where the supervisor's socket was. Defence: the socket is opened with openat2
// RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS beneath the process's root; the command takes docker
// exec and the host's socket never sees a connection.
func TestExecChannelRefusesALinkToAHostSocket(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sb, eng := channelSandbox(t)
	run(t, sb, sandbox.Shell("rm -f "+execwire.Socket+" && ln -s "+host+" "+execwire.Socket))
	eng.Reset()
	r := run(t, sb, sandbox.Shell("echo fine"))
	onDockerExec(t, eng)
	if string(r.StdoutBytes) != "fine\n" {
		t.Fatalf("got %q", r.StdoutBytes)
	}
	noConnection(t, ln)
}

// TestExecChannelRefusesAFIFO: a FIFO where the socket was. Defence: the path is opened
// O_PATH (no open of a FIFO that would wait for a writer) and must be a socket.
func TestExecChannelRefusesAFIFO(t *testing.T) {
	sb, eng := channelSandbox(t)
	run(t, sb, sandbox.Shell("rm -f "+execwire.Socket+" && mkfifo "+execwire.Socket))
	eng.Reset()
	if r := run(t, sb, sandbox.Argv("echo", "fine")); string(r.StdoutBytes) != "fine\n" {
		t.Fatalf("got %q", r.StdoutBytes)
	}
	onDockerExec(t, eng)
}

// TestExecChannelRefusesAnImpersonator: the guest starts a second copy of the supervisor,
// which takes the socket's path and speaks the protocol perfectly, but is not the container's
// first process. Defence: SO_PEERCRED must name the proven pid; the command takes docker exec.
func TestExecChannelRefusesAnImpersonator(t *testing.T) {
	sb, eng := channelSandbox(t)
	run(t, sb, sandbox.Shell(execwire.Binary+" </dev/null >/dev/null 2>&1 &"))
	// The copy removes the supervisor's socket and listens in its place: wait until it does.
	for i := 0; ; i++ {
		r := run(t, sb, sandbox.Shell("for p in /proc/[0-9]*; do [ \"$(cat $p/cmdline 2>/dev/null | tr '\\0' ' ')\" = '"+execwire.Binary+" ' ] && echo ${p#/proc/}; done"))
		if pid := strings.TrimSpace(string(r.StdoutBytes)); pid != "" && pid != "1" {
			break
		}
		if i > 1000 {
			t.Fatal("the impersonator never started")
		}
	}
	for i := 0; ; i++ {
		eng.Reset()
		r := run(t, sb, sandbox.Argv("echo", "fine"))
		if string(r.StdoutBytes) != "fine\n" {
			t.Fatalf("got %q", r.StdoutBytes)
		}
		if driverExecs(eng) > 0 {
			break // the impersonator holds the path and was refused
		}
		if i > 1000 {
			t.Fatal("every command took the channel: the impersonator was never met")
		}
	}
	eng.Reset()
	run(t, sb, sandbox.Argv("true"))
	onDockerExec(t, eng)
}

// TestExecChannelBoundsAFlood: a command that writes without end is stopped at the output
// budget, from outside, and its process group killed; the sandbox serves the next command.
// Defence: the engine counts the bytes, sends Kill and stops reading; the supervisor kills.
func TestExecChannelBoundsAFlood(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	_, err := sb.ExecBounded(itest.Context(t), sandbox.Shell("cat /dev/zero; echo never"), "", time.Minute, 1<<20)
	var le *sandbox.ExecOutputLimitExceededError
	if !errors.As(err, &le) || le.Discarded {
		t.Fatalf("got %v, want an output limit error that keeps the sandbox", err)
	}
	onChannel(t, eng)
	// The kill is the supervisor's, after the answer: wait for the flood's end.
	for i := 0; ; i++ {
		r := run(t, sb, sandbox.Shell("for p in /proc/[0-9]*; do [ \"$(cat $p/cmdline 2>/dev/null | tr '\\0' ' ')\" = 'cat /dev/zero ' ] && echo ${p#/proc/}; done; true"))
		if strings.TrimSpace(string(r.StdoutBytes)) == "" {
			break
		}
		if i > 1000 {
			t.Fatalf("the flood still runs: %q", r.StdoutBytes)
		}
	}
	onChannel(t, eng)
}

// TestExecChannelBoundsAStall: a command that never ends and writes nothing is answered at
// the caller's timeout, as docker exec's is: the sandbox is discarded.
func TestExecChannelBoundsAStall(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	_, err := sb.Exec(itest.Context(t), sandbox.Shell("exec sleep 1000"), "", 2*time.Second)
	var te *sandbox.TimeoutError
	if !errors.As(err, &te) || !te.Discarded {
		t.Fatalf("got %v, want a timeout that discards the sandbox", err)
	}
	onChannel(t, eng)
}

// noConnection fails the test when anyone connected to ln: a pending connection makes the
// listening socket readable, and a poll that does not wait says whether it is.
func noConnection(t *testing.T, ln net.Listener) {
	t.Helper()
	f, err := ln.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Fatal("the host's socket was connected to from the sandbox's path")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
