package process

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/integration/internal/itest"
)

// TestEngineProcessVerbs: the engine command as a person uses it against engine serve:
// run --detach starts a process and prints its ID, ps lists it, logs prints its output
// (from a sequence too), attach feeds it stdin and exits with its code, kill signals one.
func TestEngineProcessVerbs(t *testing.T) {
	url := itest.StartServe(t, nil)
	bin := itest.BuildEngine(t)
	thread := "cli-" + strings.TrimPrefix(itest.NewKey(t).Scope, "it-")
	key := []string{"--nats-url", url, "--scope", "cli", "--thread", thread}
	engine := func(stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("engine %v: %v", args, err)
		}
		if code != 0 && args[0] != "attach" {
			t.Fatalf("engine %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String(), code
	}
	t.Cleanup(func() {
		_, _ = exec.Command(bin, "run", "--nats-url", url, "--scope", "cli", "--thread", thread, "--", "true").CombinedOutput()
	})

	id, _ := engine("", append([]string{"run", "--detach", "--id", "greeter"}, append(key, "--shell", "echo hello")...)...)
	if strings.TrimSpace(id) != "greeter" {
		t.Fatalf("run --detach printed %q", id)
	}
	engine("", append([]string{"run", "--detach", "--id", "cat", "--stdin"}, append(key, "--shell", "cat; exit 5")...)...)
	engine("", append([]string{"run", "--detach", "--id", "sleeper"}, append(key, "--", "sleep", "300")...)...)

	if out, _ := engine("", append([]string{"logs", "--follow"}, append(key, "greeter")...)...); out != "hello\n" {
		t.Fatalf("logs: %q", out)
	}
	if out, _ := engine("", append([]string{"logs", "--from", "2"}, append(key, "greeter")...)...); out != "llo\n" {
		t.Fatalf("logs --from 2: %q", out)
	}
	if out, code := engine("typed in\n", append([]string{"attach", "--from", "0"}, append(key, "cat")...)...); out != "typed in\n" || code != 5 {
		t.Fatalf("attach: %q, exit %d", out, code)
	}
	engine("", append([]string{"kill", "--signal", "KILL"}, append(key, "sleeper")...)...)
	out, _ := engine("", append([]string{"ps"}, key...)...)
	for _, want := range []string{"greeter", "exited 0", "cat", "exited 5", "sleeper", "signalled (SIGKILL)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ps lacks %q:\n%s", want, out)
		}
	}
}

// openPTY opens a terminal pair for the test: the master, and the peer a command gets as its
// terminal, sized rows x cols.
func openPTY(t *testing.T, rows, cols uint16) (master, peer *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
	p, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return m, p
}

// TestEngineAttachWithATerminal: engine attach run on a terminal (a pty of the test's, 30x100)
// to a process that has one puts the local terminal in raw mode, gives the process the local
// size, and carries what is typed to the process and its output back; it exits with the
// process's code.
func TestEngineAttachWithATerminal(t *testing.T) {
	url := itest.StartServe(t, nil)
	bin := itest.BuildEngine(t)
	thread := "tty-" + strings.TrimPrefix(itest.NewKey(t).Scope, "it-")
	key := []string{"--nats-url", url, "--scope", "cli", "--thread", thread}
	t.Cleanup(func() {
		_, _ = exec.Command(bin, append([]string{"run"}, append(key, "--", "true")...)...).CombinedOutput()
	})
	start := exec.Command(bin, append([]string{"run", "--detach", "--id", "term", "--tty"}, append(key, "--shell", "read x; stty size; echo got $x; exit 3")...)...)
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("run --detach --tty: %v\n%s", err, out)
	}
	master, peer := openPTY(t, 30, 100)
	attach := exec.Command(bin, append([]string{"attach", "--from", "0"}, append(key, "term")...)...)
	attach.Stdin, attach.Stdout, attach.Stderr = peer, peer, peer
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- attach.Wait() }()
	var seen itest.LogBuffer
	go func() { _, _ = io.Copy(&seen, master) }()
	// The process reads first, so whatever the attach does before it carries the line (its
	// resize among it) is done before the process asks its size.
	if _, err := master.Write([]byte("typed\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("attach ended with %v, want exit 3", err)
		}
	case <-time.After(time.Minute):
		_ = attach.Process.Kill()
		t.Fatal("attach did not end with the process")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(seen.String(), "30 100") || !strings.Contains(seen.String(), "got typed") {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal shows %q: want the process's size 30 100 and what was typed", seen.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
