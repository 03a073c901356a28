package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/execwire"
)

// The supervisor's processes, run on the test's host: a supervisor serving on a socket of the
// test's own, reaping its children as PID 1 would.

// testSupervisor serves a supervisor on a socket in a temporary directory and returns its
// path. The test process reaps its children on SIGCHLD as the supervisor does as PID 1.
func testSupervisor(t *testing.T) (string, *supervisor) {
	t.Helper()
	s := &supervisor{env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"}, waiting: map[int]chan syscall.WaitStatus{}}
	s.procs = newProcTable(s)
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				s.reap()
			case <-time.After(50 * time.Millisecond):
				s.reap()
			case <-stop:
				return
			}
		}
	}()
	path := filepath.Join(t.TempDir(), "sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go s.serve(ln)
	t.Cleanup(func() {
		s.procs.endAll()
		ln.Close()
		signal.Stop(sigs)
		close(stop)
	})
	return path, s
}

// dial connects and reads the Hello.
func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	typ, p, err := execwire.Read(c, 64)
	if err != nil || typ != execwire.Hello || string(p) != execwire.Version {
		t.Fatalf("hello: %q %q %v", typ, p, err)
	}
	return c
}

// call sends one call on a connection of its own and returns the reply.
func call(t *testing.T, path string, req execwire.CallRequest) execwire.CallReply {
	t.Helper()
	c := dial(t, path)
	b, _ := json.Marshal(req)
	if err := execwire.Write(c, execwire.Call, b); err != nil {
		t.Fatal(err)
	}
	typ, p, err := execwire.Read(c, execwire.MaxPayload)
	if err != nil || typ != execwire.Reply {
		t.Fatalf("reply: %q %v", typ, err)
	}
	var rep execwire.CallReply
	if err := json.Unmarshal(p, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func start(t *testing.T, path string, req execwire.StartRequest) *execwire.Process {
	t.Helper()
	rep := call(t, path, execwire.CallRequest{Op: execwire.OpStart, Start: &req})
	if rep.Error != nil || rep.Process == nil {
		t.Fatalf("start %v: %+v", req.Argv, rep.Error)
	}
	return rep.Process
}

// output is what an attach from seq gathered until the End: the bytes of each stream, the
// gaps, and the end.
type gathered struct {
	streams map[byte]*bytes.Buffer
	all     bytes.Buffer
	gaps    [][]int64
	end     *execwire.Process
}

func attachAll(t *testing.T, path, id string, from int64) *gathered {
	t.Helper()
	c := dial(t, path)
	b, _ := json.Marshal(execwire.AttachRequest{ID: id, From: from})
	if err := execwire.Write(c, execwire.Attach, b); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	g := &gathered{streams: map[byte]*bytes.Buffer{}}
	next := from
	for {
		typ, p, err := execwire.Read(c, execwire.MaxPayload)
		if err != nil {
			t.Fatalf("attach %s: %v after %d bytes", id, err, g.all.Len())
		}
		switch typ {
		case execwire.Chunk:
			stream, seq, data, err := execwire.DecodeChunk(p)
			if err != nil || seq != next {
				t.Fatalf("chunk at %d, want %d (%v)", seq, next, err)
			}
			next += int64(len(data))
			if g.streams[stream] == nil {
				g.streams[stream] = &bytes.Buffer{}
			}
			g.streams[stream].Write(data)
			g.all.Write(data)
		case execwire.Gap:
			seqs, _ := execwire.DecodeSeqs(p, 2)
			g.gaps = append(g.gaps, seqs)
			next = seqs[1]
		case execwire.Caught:
		case execwire.End:
			g.end = &execwire.Process{}
			if err := json.Unmarshal(p, g.end); err != nil {
				t.Fatal(err)
			}
			return g
		default:
			t.Fatalf("frame %q: %s", typ, p)
		}
	}
}

func (g *gathered) stream(s byte) string {
	if g.streams[s] == nil {
		return ""
	}
	return g.streams[s].String()
}

func TestProcessOutputAndExit(t *testing.T) {
	path, _ := testSupervisor(t)
	p := start(t, path, execwire.StartRequest{ID: "a", Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Env: []string{"X=1"}})
	if !p.Created || p.PID <= 0 {
		t.Fatalf("start: %+v", p)
	}
	g := attachAll(t, path, "a", 0)
	if g.stream(1) != "out\n" || g.stream(2) != "err\n" {
		t.Fatalf("stdout %q stderr %q", g.stream(1), g.stream(2))
	}
	if e := g.end.Exit; e == nil || e.Reason != execwire.ReasonExited || e.Code != 3 || g.end.End != 8 {
		t.Fatalf("end %+v exit %+v", g.end, g.end.Exit)
	}
	// From any sequence, the rest: stdout and stderr share one sequence, in the order read.
	if h := attachAll(t, path, "a", 5); h.all.String() != g.all.String()[5:] {
		t.Fatalf("from 5: %q of %q", h.all.String(), g.all.String())
	}
}

func TestProcessStartIsIdempotentByID(t *testing.T) {
	path, _ := testSupervisor(t)
	req := execwire.StartRequest{ID: "same", Argv: []string{"sleep", "30"}}
	a := start(t, path, req)
	b := start(t, path, req)
	if b.Created || b.PID != a.PID {
		t.Fatalf("the retried start made another process: %+v then %+v", a, b)
	}
	req.Argv = []string{"sleep", "31"}
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpStart, Start: &req}); rep.Error == nil || rep.Error.Code != execwire.CodeExists {
		t.Fatalf("another command under the same ID: %+v", rep)
	}
	if n := len(call(t, path, execwire.CallRequest{Op: execwire.OpList}).Processes); n != 1 {
		t.Fatalf("%d processes listed", n)
	}
}

func TestProcessStdin(t *testing.T) {
	path, _ := testSupervisor(t)
	start(t, path, execwire.StartRequest{ID: "cat", Argv: []string{"cat"}, Stdin: true})
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpStdin, ID: "cat", Data: []byte("hello ")}); rep.Error != nil || rep.Written != 6 {
		t.Fatalf("stdin: %+v", rep)
	}
	call(t, path, execwire.CallRequest{Op: execwire.OpStdin, ID: "cat", Data: []byte("world")})
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpCloseStdin, ID: "cat"}); rep.Error != nil {
		t.Fatalf("close: %+v", rep.Error)
	}
	g := attachAll(t, path, "cat", 0)
	if g.stream(1) != "hello world" || g.end.Exit.Code != 0 {
		t.Fatalf("got %q, %+v", g.stream(1), g.end.Exit)
	}
	rep := call(t, path, execwire.CallRequest{Op: execwire.OpStdin, ID: "cat", Data: []byte("late")})
	if rep.Error == nil || rep.Error.Code != execwire.CodeEnded {
		t.Fatalf("stdin after the end: %+v", rep)
	}
	start(t, path, execwire.StartRequest{ID: "closed", Argv: []string{"sleep", "30"}})
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpStdin, ID: "closed", Data: []byte("x")}); rep.Error == nil || rep.Error.Code != execwire.CodeStdinClosed {
		t.Fatalf("stdin of a process started without it: %+v", rep)
	}
}

func TestProcessTerminal(t *testing.T) {
	path, _ := testSupervisor(t)
	start(t, path, execwire.StartRequest{ID: "tty", Argv: []string{"sh", "-c", "stty size; [ -t 0 ] && echo tty; read x; stty size; echo got $x"},
		TTY: &execwire.Size{Rows: 24, Cols: 80}})
	waitFor(t, path, "tty", "tty")
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpResize, ID: "tty", Size: &execwire.Size{Rows: 30, Cols: 100}}); rep.Error != nil {
		t.Fatalf("resize: %+v", rep.Error)
	}
	call(t, path, execwire.CallRequest{Op: execwire.OpStdin, ID: "tty", Data: []byte("abc\n")})
	g := attachAll(t, path, "tty", 0)
	out := strings.ReplaceAll(g.stream(3), "\r", "")
	if !strings.Contains(out, "24 80\ntty\n") || !strings.Contains(out, "30 100\ngot abc") || g.stream(1) != "" {
		t.Fatalf("terminal output %q", g.stream(3))
	}
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpResize, ID: "tty", Size: &execwire.Size{Rows: 1, Cols: 1}}); rep.Error == nil {
		t.Fatal("a resize after the end was taken")
	}
}

// waitFor waits until id's output holds want.
func waitFor(t *testing.T, path, id, want string) {
	t.Helper()
	c := dial(t, path)
	b, _ := json.Marshal(execwire.AttachRequest{ID: id})
	_ = execwire.Write(c, execwire.Attach, b)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got bytes.Buffer
	for !strings.Contains(got.String(), want) {
		typ, p, err := execwire.Read(c, execwire.MaxPayload)
		if err != nil || typ == execwire.End {
			t.Fatalf("%s ended (%v) before %q: %q", id, err, want, got.String())
		}
		if typ == execwire.Chunk {
			_, _, data, _ := execwire.DecodeChunk(p)
			got.Write(data)
		}
	}
}

func TestProcessEndings(t *testing.T) {
	path, _ := testSupervisor(t)
	start(t, path, execwire.StartRequest{ID: "term", Argv: []string{"sleep", "30"}})
	start(t, path, execwire.StartRequest{ID: "slow", Argv: []string{"sleep", "30"}, TimeoutMS: 100})
	start(t, path, execwire.StartRequest{ID: "d1", Argv: []string{"sleep", "30"}})
	start(t, path, execwire.StartRequest{ID: "d2", Argv: []string{"sh", "-c", "sleep 30; sleep 30"}})
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpSignal, ID: "term", Signal: int(syscall.SIGTERM)}); rep.Error != nil {
		t.Fatalf("signal: %+v", rep.Error)
	}
	cases := []struct {
		id     string
		reason string
		signal syscall.Signal
	}{
		{"term", execwire.ReasonSignalled, syscall.SIGTERM},
		{"slow", execwire.ReasonTimedOut, syscall.SIGKILL},
	}
	for _, tc := range cases {
		rep := call(t, path, execwire.CallRequest{Op: execwire.OpWait, ID: tc.id})
		if e := rep.Process.Exit; e == nil || e.Reason != tc.reason || e.Signal != int(tc.signal) {
			t.Fatalf("%s: %+v", tc.id, rep.Process.Exit)
		}
	}
	for _, p := range call(t, path, execwire.CallRequest{Op: execwire.OpEndAll}).Processes {
		if p.ID[0] == 'd' && (p.Exit == nil || p.Exit.Reason != execwire.ReasonDisposed) {
			t.Fatalf("%s after end_all: %+v", p.ID, p.Exit)
		}
	}
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpSignal, ID: "d1", Signal: int(syscall.SIGTERM)}); rep.Error == nil || rep.Error.Code != execwire.CodeEnded {
		t.Fatalf("signal after the end: %+v", rep)
	}
	if rep := call(t, path, execwire.CallRequest{Op: execwire.OpSignal, ID: "nobody", Signal: 15}); rep.Error == nil || rep.Error.Code != execwire.CodeNotFound {
		t.Fatalf("signal of no process: %+v", rep)
	}
}

func TestProcessRefusals(t *testing.T) {
	path, _ := testSupervisor(t)
	start(t, path, execwire.StartRequest{ID: "one", Argv: []string{"sleep", "30"}, MaxProcesses: 1})
	cases := []struct {
		name  string
		req   execwire.StartRequest
		code  string
		cause string
	}{
		{"over the limit", execwire.StartRequest{ID: "two", Argv: []string{"true"}, MaxProcesses: 1}, execwire.CodeLimit, ""},
		{"no program", execwire.StartRequest{ID: "x", Argv: []string{"/no/such/program"}}, execwire.CodeNotStarted, "program"},
		{"no directory", execwire.StartRequest{ID: "y", Argv: []string{"true"}, Dir: "/no/such/dir"}, execwire.CodeNotStarted, "work_dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := call(t, path, execwire.CallRequest{Op: execwire.OpStart, Start: &tc.req})
			if rep.Error == nil || rep.Error.Code != tc.code || rep.Error.Cause != tc.cause {
				t.Fatalf("got %+v", rep.Error)
			}
		})
	}
	if n := len(call(t, path, execwire.CallRequest{Op: execwire.OpList}).Processes); n != 1 {
		t.Fatalf("a refused start left a process: %d listed", n)
	}
}

// A process writing more than its buffer holds loses the oldest output, and a reader from the
// start is told which range.
func TestProcessBufferDropsTheOldestWithAGap(t *testing.T) {
	path, _ := testSupervisor(t)
	start(t, path, execwire.StartRequest{ID: "big", Argv: []string{"sh", "-c", "head -c 200000 /dev/zero"}, Buffer: 50000})
	call(t, path, execwire.CallRequest{Op: execwire.OpWait, ID: "big"})
	g := attachAll(t, path, "big", 0)
	if len(g.gaps) != 1 || g.gaps[0][0] != 0 || g.gaps[0][1]+int64(g.all.Len()) != 200000 || g.all.Len() > 50000+execwire.MaxChunk {
		t.Fatalf("gaps %v, %d bytes held", g.gaps, g.all.Len())
	}
}

// While an engine stores a process's output (it sends Release), output past the buffer waits
// for room: the process is held back, nothing is dropped, however slowly the engine reads.
// A start that says an engine is about to follow (HoldMS, as the engine's every start does)
// holds the output back from the start, before the engine attaches. Attached at once, the
// engine's hold is 1 s and the process writes half its output after it, held by the follower
// alone; attached late, the hold covers the 300 ms before the attach.
func TestProcessFollowedIsHeldBackNotDropped(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("attached late %t", late), func(t *testing.T) { followAll(t, late) })
	}
}

func followAll(t *testing.T, late bool) {
	path, _ := testSupervisor(t)
	const total = 1_000_000
	req := execwire.StartRequest{ID: "held", Argv: []string{"sh", "-c", "head -c 500000 /dev/zero; sleep 1.5; head -c 500000 /dev/zero"},
		Buffer: 50000, HoldMS: 1000}
	if late {
		req.HoldMS = 30_000
	}
	start(t, path, req)
	if late {
		time.Sleep(300 * time.Millisecond) // the engine's pump on its way
	}
	c := dial(t, path)
	b, _ := json.Marshal(execwire.AttachRequest{ID: "held"})
	_ = execwire.Write(c, execwire.Attach, b)
	_ = execwire.Write(c, execwire.Release, execwire.EncodeSeqs(0)) // a follower from the start
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	next := int64(0)
	for {
		typ, p, err := execwire.Read(c, execwire.MaxPayload)
		if err != nil {
			t.Fatalf("after %d bytes: %v", next, err)
		}
		switch typ {
		case execwire.Gap:
			t.Fatalf("a gap at %d: the followed process's output was dropped", next)
		case execwire.Chunk:
			_, seq, data, _ := execwire.DecodeChunk(p)
			if seq != next {
				t.Fatalf("chunk at %d, want %d", seq, next)
			}
			next += int64(len(data))
			time.Sleep(time.Millisecond) // a slow engine
			_ = execwire.Write(c, execwire.Release, execwire.EncodeSeqs(next))
		case execwire.End:
			if next != total {
				t.Fatalf("ended at %d, want %d", next, total)
			}
			return
		}
	}
}
