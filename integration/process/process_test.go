package process

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestProcessLifecycle: a background process on the supervisor reads its stdin, writes both
// streams, and ends; its output is read from any sequence, its exit carries its code, and it
// is listed with its state throughout. A start retried under the same ID returns the same
// process; another command under it is refused.
func TestProcessLifecycle(t *testing.T) {
	_, _, sb := procSandbox(t)
	spec := sandbox.ProcessSpec{ID: "repl", Command: sandbox.Shell("echo ready; read line; echo got $line; echo oops >&2; exit 7"), Stdin: true, Env: []string{"GREETING=hi"}}
	p := start(t, sb, spec)
	if !p.Created || !p.Durable || p.Transport != sandbox.TransportSupervisor || p.State != sandbox.ProcessStateRunning || p.PID <= 1 {
		t.Fatalf("start: %+v", p)
	}
	again := start(t, sb, spec)
	if again.Created || again.PID != p.PID {
		t.Fatalf("the retried start made another process: %+v", again)
	}
	other := spec
	other.Command = sandbox.Shell("true")
	if _, err := sb.StartProcess(itest.Context(t), other); !errors.As(err, new(*sandbox.ProcessExistsError)) {
		t.Fatalf("another command under the same ID: %v", err)
	}
	waitOutput(t, sb, "repl", "ready\n")
	if err := sb.WriteProcessStdin(itest.Context(t), "repl", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if done := wait(t, sb, "repl"); done.State != sandbox.ProcessStateExited || done.Exit.Reason != sandbox.ExitExited || done.Exit.ExitCode != 7 {
		t.Fatalf("wait: %+v %+v", done, done.Exit)
	}
	all, cut, exit := readAll(t, sb, "repl", 0, 3)
	// stdout and stderr share the sequence in the order they were read, which across the two
	// pipes is not the order they were written.
	if cut != nil || exit.ExitCode != 7 || !strings.Contains(strings.Replace(string(all), "oops\n", "", 1), "ready\ngot hello\n") || !strings.Contains(string(all), "oops\n") || len(all) != 21 {
		t.Fatalf("output %q, cut %v, exit %+v", all, cut, exit)
	}
	if rest, _, _ := readAll(t, sb, "repl", 6, 1<<20); !bytes.Equal(rest, all[6:]) {
		t.Fatalf("from 6: %q, want %q", rest, all[6:])
	}
	ps, err := sb.ListProcesses(itest.Context(t))
	if err != nil || len(ps) != 1 || ps[0].ID != "repl" || ps[0].Exit == nil || ps[0].Output != 21 {
		t.Fatalf("list: %+v %v", ps, err)
	}
	if err := sb.WriteProcessStdin(itest.Context(t), "repl", []byte("late")); !errors.As(err, new(*sandbox.ProcessEndedError)) {
		t.Fatalf("stdin after the end: %v", err)
	}
	if _, err := sb.ReadProcessOutput(itest.Context(t), "nobody", 0, sandbox.ReadOptions{}); !errors.As(err, new(*sandbox.ProcessNotFoundError)) {
		t.Fatalf("read of no process: %v", err)
	}
}

// TestProcessTerminal: a process with a terminal sees one of the size asked, gets a resize,
// and answers through it; its output is one stream.
func TestProcessTerminal(t *testing.T) {
	_, _, sb := procSandbox(t)
	start(t, sb, sandbox.ProcessSpec{ID: "tty", Command: sandbox.Shell("stty size; [ -t 0 ] && echo is-a-tty; read x; stty size; echo got $x"),
		Terminal: &sandbox.TerminalSize{Rows: 24, Cols: 80}})
	waitOutput(t, sb, "tty", "is-a-tty")
	if err := sb.ResizeProcess(itest.Context(t), "tty", sandbox.TerminalSize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteProcessStdin(itest.Context(t), "tty", []byte("abc\n")); err != nil {
		t.Fatal(err)
	}
	r, err := sb.ReadProcessOutput(itest.Context(t), "tty", 0, sandbox.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, sb, "tty")
	out, _, _ := readAll(t, sb, "tty", 0, 1<<20)
	text := strings.ReplaceAll(string(out), "\r", "")
	if !strings.Contains(text, "24 80\nis-a-tty\n") || !strings.Contains(text, "40 120\ngot abc\n") || r.Chunks[0].Stream != sandbox.StreamTerminal {
		t.Fatalf("terminal output %q (first stream %s)", out, r.Chunks[0].Stream)
	}
	if err := sb.ResizeProcess(itest.Context(t), "tty", sandbox.TerminalSize{Rows: 1, Cols: 1}); !errors.As(err, new(*sandbox.ProcessEndedError)) {
		t.Fatalf("a resize after the end: %v", err)
	}
}

// TestProcessEndings: each way a process ends is recorded with its reason, and only the
// kernel's own accounting makes one "oom_killed": a SIGKILL the guest sends, or a shell that
// exits 137, is not.
func TestProcessEndings(t *testing.T) {
	b := itest.NewBackendWithConfig(t, func(c *docker.Config) { c.Memory = "48m" }, actors.WithExecChannel(itest.ExecSupervisor(t)))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t)).(*actors.Sandbox)
	start(t, sb, sandbox.ProcessSpec{ID: "term", Command: sandbox.Argv("sleep", "300")})
	start(t, sb, sandbox.ProcessSpec{ID: "slow", Command: sandbox.Argv("sleep", "300"), Timeout: 200 * time.Millisecond})
	victim := start(t, sb, sandbox.ProcessSpec{ID: "guest-kill", Command: sandbox.Argv("sleep", "301")})
	start(t, sb, sandbox.ProcessSpec{ID: "exit137", Command: sandbox.Shell("exit 137")})
	start(t, sb, sandbox.ProcessSpec{ID: "hog", Command: sandbox.Argv("dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1")})
	if err := sb.SignalProcess(itest.Context(t), "term", sandbox.SIGTERM); err != nil {
		t.Fatal(err)
	}
	runExec(t, sb, sandbox.Argv("kill", "-9", fmt.Sprint(victim.PID))) // the guest's own SIGKILL
	cases := []struct {
		id     string
		reason sandbox.ExitReason
		code   int
		signal sandbox.Signal
	}{
		{"term", sandbox.ExitSignalled, 128 + 15, sandbox.SIGTERM},
		{"slow", sandbox.ExitTimedOut, 128 + 9, sandbox.SIGKILL},
		{"guest-kill", sandbox.ExitSignalled, 128 + 9, sandbox.SIGKILL},
		{"exit137", sandbox.ExitExited, 137, 0},
		{"hog", sandbox.ExitOOMKilled, 128 + 9, sandbox.SIGKILL},
	}
	for _, tc := range cases {
		p := wait(t, sb, tc.id)
		if e := p.Exit; e == nil || e.Reason != tc.reason || e.ExitCode != tc.code || e.Signal != tc.signal {
			t.Errorf("%s: %+v, want %s %d %s", tc.id, p.Exit, tc.reason, tc.code, tc.signal)
		}
	}
	if err := sb.SignalProcess(itest.Context(t), "term", sandbox.SIGTERM); !errors.As(err, new(*sandbox.ProcessEndedError)) {
		t.Fatalf("a signal after the end: %v", err)
	}
}

// TestProcessLimits: each bound refuses with its typed error, and nothing is left started.
func TestProcessLimits(t *testing.T) {
	_, _, sb := procSandbox(t, actors.WithProcessLimits(actors.ProcessLimits{MaxProcesses: 2, MaxStdinBytes: 1024}))
	start(t, sb, sandbox.ProcessSpec{ID: "a", Command: sandbox.Argv("cat"), Stdin: true})
	start(t, sb, sandbox.ProcessSpec{ID: "b", Command: sandbox.Argv("sleep", "300")})
	var le *sandbox.ProcessLimitError
	if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: "c", Command: sandbox.Argv("true")}); !errors.As(err, &le) || le.Limit != "processes" || !errors.Is(err, sandbox.ErrRefused) {
		t.Fatalf("a third process: %v", err)
	}
	if err := sb.WriteProcessStdin(itest.Context(t), "a", make([]byte, 1025)); !errors.As(err, &le) || le.Limit != "stdin_bytes" {
		t.Fatalf("an oversize write: %v", err)
	}
	if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: "d", Command: sandbox.Argv("true"),
		Retention: &sandbox.OutputRetention{Bytes: actors.MaxProcessHeld + 1}}); !errors.As(err, &le) || le.Limit != "retention_bytes" {
		t.Fatalf("an oversize retention: %v", err)
	}
	if err := sb.SignalProcess(itest.Context(t), "b", sandbox.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, sb, "b")
	var se *sandbox.ProcessStartError
	if _, err := sb.StartProcess(itest.Context(t), sandbox.ProcessSpec{ID: "e", Command: sandbox.Argv("/no/such/program")}); !errors.As(err, &se) || se.Cause != sandbox.StartNoProgram {
		t.Fatalf("a program that is not there: %v", err)
	}
	if ps, _ := sb.ListProcesses(itest.Context(t)); len(ps) != 2 {
		t.Fatalf("refused starts left processes: %+v", ps)
	}
	start(t, sb, sandbox.ProcessSpec{ID: "c", Command: sandbox.Argv("true")}) // room again
}

// TestProcessOutputCut: output written faster than anything stores it, past what the
// supervisor holds for the process, loses its oldest part, and a reader from the start is
// told where and how much.
func TestProcessOutputCut(t *testing.T) {
	_, _, sb := procSandbox(t)
	const held, total = 64 << 10, 1 << 20
	start(t, sb, sandbox.ProcessSpec{ID: "flood", Command: sandbox.Shell(fmt.Sprintf("head -c %d /dev/zero", total)),
		Retention: &sandbox.OutputRetention{Bytes: held}})
	wait(t, sb, "flood")
	out, cut, exit := readAll(t, sb, "flood", 0, 1<<20)
	if cut == nil || cut.From != 0 || cut.To+int64(len(out)) != total || len(out) > held+32<<10 || exit.ExitCode != 0 {
		t.Fatalf("cut %+v, %d bytes read", cut, len(out))
	}
}

// TestProcessOutlivesItsEngine: processes started by one engine run on after it stops, and a
// second engine on the same daemon finds them by ID, reads what they wrote while no engine
// was there from sequence 0, each byte once and in order, and waits for their ends.
func TestProcessOutlivesItsEngine(t *testing.T) {
	first := channelBackend(t)
	key := itest.NewKey(t)
	got, err := first.Acquire(itest.Context(t), key, itest.BusyboxSpec(t)) // the second engine disposes it
	if err != nil {
		t.Fatal(err)
	}
	sb := got.(*actors.Sandbox)
	const lines = 20000
	for i := range 3 {
		start(t, sb, sandbox.ProcessSpec{ID: fmt.Sprintf("writer-%d", i),
			Command: sandbox.Shell(fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo %d-$i; i=$((i+1)); done; sleep 1", lines, i))})
	}
	first.Close(itest.Context(t))
	second := channelBackend(t)
	sb2 := itest.Acquire(t, second, key, itest.BusyboxSpec(t)).(*actors.Sandbox)
	ps, err := sb2.ListProcesses(itest.Context(t))
	if err != nil || len(ps) != 3 {
		t.Fatalf("the second engine lists %+v, %v", ps, err)
	}
	for i, p := range ps {
		if !p.Durable || p.ID != fmt.Sprintf("writer-%d", i) {
			t.Fatalf("process %d: %+v", i, p)
		}
		out, cut, exit := readAll(t, sb2, p.ID, 0, 256<<10)
		var want bytes.Buffer
		for j := range lines {
			fmt.Fprintf(&want, "%d-%d\n", i, j)
		}
		if cut != nil || exit.ExitCode != 0 || !bytes.Equal(out, want.Bytes()) {
			t.Fatalf("%s: %d bytes, want %d; cut %v, exit %+v", p.ID, len(out), want.Len(), cut, exit)
		}
	}
}
