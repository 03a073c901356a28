package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/internal/procbuf"
)

// The processes this supervisor owns: started by a Call, they live until they end whatever
// becomes of the connection that started them or of the engine, and their output is held
// here (bounded) until the engine says it stored it or the bound drops the oldest.
//
// Bounds: each process holds at most its Buffer (default defaultBuffer, at most maxBuffer);
// all processes together at most totalHeld, beyond which the oldest chunk of the process
// holding most is dropped; at most maxEnded ended processes are remembered, the oldest ended
// forgotten first.
const (
	defaultBuffer = 4 << 20
	maxBuffer     = 64 << 20
	totalHeld     = 64 << 20
	maxEnded      = 256
	stdinWait     = 5 * time.Second // a write to an input nobody reads gives up after this
)

// procTable is every process the supervisor owns.
type procTable struct {
	s *supervisor

	mu    sync.Mutex
	procs map[string]*managed
	order []string // start order

	held atomic.Int64 // bytes held by every buffer
	oom  oomCounter
}

// managed is one process and its output.
type managed struct {
	buf   *procbuf.Buffer
	limit int64         // what buf holds at most
	done  chan struct{} // closed once it ended and its output is complete

	// followers counts the attached engines that store its output (they send Release):
	// while one does, or until holdUntil while one is on its way, output past the limit
	// waits for room instead of dropping the oldest.
	followers atomic.Int32
	holdUntil time.Time

	// guarded by the table's mu
	rec      execwire.Process
	killedBy string // ReasonTimedOut or ReasonDisposed once the supervisor killed it for that
	sentKill bool   // the engine sent SIGKILL: not the kernel's doing
	oomBase  int64  // the cgroup's oom_kill count at its start

	inMu   sync.Mutex // one write to the input at a time
	input  *os.File   // the write end of its input pipe, or its terminal's master; nil when closed
	master *os.File   // its terminal's master, for resizes; nil without a terminal
	timer  *time.Timer
}

func newProcTable(s *supervisor) *procTable {
	t := &procTable{s: s, procs: map[string]*managed{}}
	t.oom.init()
	return t
}

// call answers one Call.
func (t *procTable) call(c *execwire.CallRequest) execwire.CallReply {
	switch c.Op {
	case execwire.OpStart:
		return t.start(c.Start)
	case execwire.OpList:
		return execwire.CallReply{Processes: t.list()}
	case execwire.OpStdin:
		return t.stdin(c.ID, c.Data)
	case execwire.OpCloseStdin:
		return t.closeStdin(c.ID)
	case execwire.OpResize:
		return t.resize(c.ID, c.Size)
	case execwire.OpSignal:
		return t.signal(c.ID, c.Signal)
	case execwire.OpWait:
		m, rep := t.get(c.ID)
		if m == nil {
			return rep
		}
		<-m.done
		return execwire.CallReply{Process: t.record(m)}
	case execwire.OpEndAll:
		return execwire.CallReply{Processes: t.endAll()}
	}
	return failed(execwire.CodeInvalid, "unknown operation "+strconv.Quote(c.Op))
}

func failed(code, msg string) execwire.CallReply {
	return execwire.CallReply{Error: &execwire.CallError{Code: code, Message: msg}}
}

func (t *procTable) get(id string) (*managed, execwire.CallReply) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.procs[id]
	if m == nil {
		return nil, failed(execwire.CodeNotFound, "no process "+strconv.Quote(id))
	}
	return m, execwire.CallReply{}
}

// record is a copy of m's record with its output's bounds.
func (t *procTable) record(m *managed) *execwire.Process {
	st := m.buf.State()
	t.mu.Lock()
	defer t.mu.Unlock()
	r := m.rec
	r.First, r.End = st.First, st.End
	return &r
}

func (t *procTable) list() []execwire.Process {
	t.mu.Lock()
	ms := make([]*managed, 0, len(t.order))
	for _, id := range t.order {
		ms = append(ms, t.procs[id])
	}
	t.mu.Unlock()
	out := make([]execwire.Process, 0, len(ms))
	for _, m := range ms {
		out = append(out, *t.record(m))
	}
	return out
}

// digest names a start request without its ID: a retried start is the same request.
func digest(req *execwire.StartRequest) string {
	r := *req
	r.ID = ""
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// start starts req's process under its ID, or answers the one that ID already names when it
// was started by the same request. The table is held across the fork, so two starts of one ID
// start one process, and the count of running processes cannot pass the bound.
func (t *procTable) start(req *execwire.StartRequest) execwire.CallReply {
	if req == nil || req.ID == "" || len(req.Argv) == 0 {
		return failed(execwire.CodeInvalid, "a start needs an ID and a non-empty argv")
	}
	d := digest(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.procs[req.ID]; m != nil {
		if m.rec.Digest != d {
			return failed(execwire.CodeExists, "process "+strconv.Quote(req.ID)+" was started with another command")
		}
		r := m.rec
		st := m.buf.State()
		r.First, r.End = st.First, st.End
		return execwire.CallReply{Process: &r}
	}
	if req.MaxProcesses > 0 {
		running := 0
		for _, m := range t.procs {
			if m.rec.Exit == nil {
				running++
			}
		}
		if running >= req.MaxProcesses {
			return failed(execwire.CodeLimit, strconv.Itoa(running)+" processes are running, the most this sandbox runs at once")
		}
	}
	m, err := t.spawn(req)
	if err != nil {
		var f *startFailure
		if errors.As(err, &f) {
			return execwire.CallReply{Error: &execwire.CallError{Code: execwire.CodeNotStarted, Cause: f.cause, Message: f.msg}}
		}
		return execwire.CallReply{Error: &execwire.CallError{Code: execwire.CodeNotStarted, Cause: "runtime", Message: err.Error()}}
	}
	m.rec.Digest = d
	t.procs[req.ID] = m
	t.order = append(t.order, req.ID)
	t.forgetEndedLocked()
	r := m.rec
	r.Created = true
	return execwire.CallReply{Process: &r}
}

// forgetEndedLocked forgets the oldest ended processes beyond maxEnded.
func (t *procTable) forgetEndedLocked() {
	ended := 0
	for _, id := range t.order {
		if t.procs[id].rec.Exit != nil {
			ended++
		}
	}
	for i := 0; ended > maxEnded && i < len(t.order); {
		id := t.order[i]
		m := t.procs[id]
		if m.rec.Exit == nil {
			i++
			continue
		}
		t.held.Add(-m.buf.State().Held)
		delete(t.procs, id)
		t.order = append(t.order[:i], t.order[i+1:]...)
		ended--
	}
}

// spawn forks req's process (the table is held) and starts following it.
func (t *procTable) spawn(req *execwire.StartRequest) (*managed, error) {
	dir := req.Dir
	if dir == "" {
		dir = "/"
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	env := mergeEnv(t.s.env, req.Env, req.TTY != nil)
	path, err := lookPath(req.Argv[0], dir, getenv(env, "PATH"))
	if err != nil {
		return nil, err
	}
	io, err := openIO(req)
	if err != nil {
		return nil, err
	}
	limit := req.Buffer
	if limit <= 0 {
		limit = defaultBuffer
	}
	limit = min(limit, maxBuffer)
	m := &managed{buf: procbuf.New(limit), limit: limit, done: make(chan struct{}), input: io.input, master: io.master,
		oomBase: t.oom.read()}
	if req.HoldMS > 0 {
		m.holdUntil = time.Now().Add(time.Duration(req.HoldMS) * time.Millisecond)
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: io.child, Sys: &syscall.SysProcAttr{Setsid: true}}
	if req.TTY != nil {
		attr.Sys.Setctty, attr.Sys.Ctty = true, 0
	}
	status := make(chan syscall.WaitStatus, 1)
	t.s.mu.Lock()
	pid, ferr := syscall.ForkExec(path, req.Argv, attr)
	if ferr == nil {
		t.s.waiting[pid] = status
	}
	t.s.mu.Unlock()
	io.closeChild()
	if ferr != nil {
		io.closeParent()
		return nil, forkFailure(req.Argv[0], ferr)
	}
	m.rec = execwire.Process{ID: req.ID, PID: pid, Argv: req.Argv, Dir: dir, TTY: req.TTY, Stdin: io.input != nil,
		StartedAt: time.Now().UnixMilli(), TimeoutMS: req.TimeoutMS, Retention: req.Retention}
	if req.TimeoutMS > 0 {
		m.timer = time.AfterFunc(time.Duration(req.TimeoutMS)*time.Millisecond, func() { t.kill(m, execwire.ReasonTimedOut) })
	}
	go t.follow(m, io.outputs, status)
	return m, nil
}

func checkDir(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return &startFailure{"work_dir", "chdir to cwd (" + strconv.Quote(dir) + ") set in config.json failed: " + errText(err, syscall.ENOTDIR)}
	}
	return nil
}

func forkFailure(prog string, ferr error) error {
	cause := "runtime"
	switch {
	case errors.Is(ferr, syscall.EACCES), errors.Is(ferr, syscall.EISDIR):
		cause = "not_executable"
	case errors.Is(ferr, syscall.ENOENT):
		cause = "program"
	}
	return &startFailure{cause, "exec: " + strconv.Quote(prog) + ": " + ferr.Error()}
}

// mergeEnv is the supervisor's environment with extra laid over it (a later value of a name
// wins), and TERM=xterm for a terminal that names none, as docker exec -t sets it.
func mergeEnv(base, extra []string, tty bool) []string {
	if len(extra) == 0 && !tty {
		return base
	}
	out := make([]string, 0, len(base)+len(extra)+1)
	at := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), extra...) {
		k, _, _ := cutEq(kv)
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	if _, ok := at["TERM"]; tty && !ok {
		out = append(out, "TERM=xterm")
	}
	return out
}

func cutEq(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// follow reads the process's output into its buffer until its pipes close, or
// [execwire.PipeGrace] after its end when a process it left running holds them (as a Run's
// command is answered), then records how it ended.
func (t *procTable) follow(m *managed, outs []*output, status chan syscall.WaitStatus) {
	done := make(chan struct{}, len(outs))
	for _, o := range outs {
		send := func(_ byte, p []byte) error {
			t.append(m, o.typ, p)
			return nil
		}
		go o.pump(send, done)
	}
	ws := <-status
	if m.timer != nil {
		m.timer.Stop()
	}
	drain(outs, done)
	t.ended(m, ws)
}

// followedWait bounds one wait for room while an engine stores the output: the wait is
// looked at again after it, so an engine that went away stops holding the process.
const followedWait = 100 * time.Millisecond

// append adds output to m's buffer within the bound all processes share. While an engine
// stores the output (a follower) and the buffer is full, it waits for the engine to release
// some, so the process waits on its pipe rather than lose output; with nobody storing it, the
// oldest is dropped instead, so a process is never held by an engine that is not there.
func (t *procTable) append(m *managed, typ byte, p []byte) {
	for (m.followers.Load() > 0 || time.Now().Before(m.holdUntil)) && m.buf.State().Held+int64(len(p)) > m.limit {
		changed := m.buf.Changed()
		if m.buf.State().Held+int64(len(p)) <= m.limit {
			break
		}
		select {
		case <-changed:
		case <-time.After(followedWait):
		}
	}
	stream := procbuf.Stdout
	switch typ {
	case execwire.Stderr:
		stream = procbuf.Stderr
	case ptyStream:
		stream = procbuf.PTY
	}
	n := int64(len(p)) - m.buf.Append(stream, p)
	if t.held.Add(n) > totalHeld {
		t.shed()
	}
}

// shed drops the oldest chunks of the processes holding most until all hold at most totalHeld.
func (t *procTable) shed() {
	t.mu.Lock()
	ms := make([]*managed, 0, len(t.procs))
	for _, m := range t.procs {
		ms = append(ms, m)
	}
	t.mu.Unlock()
	for t.held.Load() > totalHeld {
		sort.Slice(ms, func(i, j int) bool { return ms[i].buf.State().Held > ms[j].buf.State().Held })
		n := ms[0].buf.DropOldest()
		if n == 0 {
			return
		}
		t.held.Add(-n)
	}
}

// release drops what the engine stored of m's output.
func (t *procTable) release(m *managed, seq int64) { t.held.Add(-m.buf.Release(seq)) }

// ended records how m ended, closes its input and its output, and wakes its waiters.
func (t *procTable) ended(m *managed, ws syscall.WaitStatus) {
	t.mu.Lock()
	m.rec.Exit = t.exitOf(m, ws)
	m.rec.Stdin = false
	t.forgetEndedLocked()
	t.mu.Unlock()
	m.inMu.Lock()
	if m.input != nil {
		if m.input != m.master {
			m.input.Close()
		}
		m.input = nil
	}
	if m.master != nil {
		m.master.Close()
	}
	m.inMu.Unlock()
	m.buf.Close()
	close(m.done)
}

// exitOf says why m ended (the table is held): the supervisor's own kill first, then the
// kernel's memory accounting, then the status.
func (t *procTable) exitOf(m *managed, ws syscall.WaitStatus) *execwire.ProcessExit {
	e := &execwire.ProcessExit{At: time.Now().UnixMilli(), Code: ws.ExitStatus()}
	if ws.Signaled() {
		e.Code, e.Signal = 128+int(ws.Signal()), int(ws.Signal())
	}
	killed := ws.Signaled() && ws.Signal() == syscall.SIGKILL
	switch {
	case m.killedBy != "" && killed:
		e.Reason = m.killedBy
	case !m.sentKill && m.killedBy == "" && (killed || (ws.Exited() && ws.ExitStatus() == 128+int(syscall.SIGKILL))) && t.oom.claim(m.oomBase):
		e.Reason = execwire.ReasonOOMKilled
		e.Signal = int(syscall.SIGKILL)
	case ws.Signaled():
		e.Reason = execwire.ReasonSignalled
	default:
		e.Reason = execwire.ReasonExited
	}
	return e
}

// kill kills m's group for reason (timed out, disposal) unless it already ended.
func (t *procTable) kill(m *managed, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.rec.Exit != nil {
		return
	}
	m.killedBy = reason
	_ = syscall.Kill(-m.rec.PID, syscall.SIGKILL)
}

func (t *procTable) signal(id string, sig int) execwire.CallReply {
	if sig <= 0 || sig > 64 {
		return failed(execwire.CodeInvalid, "no signal "+strconv.Itoa(sig))
	}
	m, rep := t.get(id)
	if m == nil {
		return rep
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.rec.Exit != nil {
		return failed(execwire.CodeEnded, "process "+strconv.Quote(id)+" has ended")
	}
	if syscall.Signal(sig) == syscall.SIGKILL {
		m.sentKill = true
	}
	if err := syscall.Kill(-m.rec.PID, syscall.Signal(sig)); err != nil {
		return failed(execwire.CodeInvalid, "signal "+strconv.Itoa(sig)+": "+err.Error())
	}
	return execwire.CallReply{}
}

// endAll kills every running process (the sandbox is being disposed) and answers once each
// has ended, with every process.
func (t *procTable) endAll() []execwire.Process {
	t.mu.Lock()
	var running []*managed
	for _, m := range t.procs {
		if m.rec.Exit == nil {
			running = append(running, m)
		}
	}
	t.mu.Unlock()
	for _, m := range running {
		t.kill(m, execwire.ReasonDisposed)
	}
	for _, m := range running {
		<-m.done
	}
	return t.list()
}

// stdin writes data to m's input, waiting at most stdinWait for the process to read it.
func (t *procTable) stdin(id string, data []byte) execwire.CallReply {
	m, rep := t.get(id)
	if m == nil {
		return rep
	}
	m.inMu.Lock()
	defer m.inMu.Unlock()
	if m.input == nil {
		return t.noInput(m)
	}
	_ = m.input.SetWriteDeadline(time.Now().Add(stdinWait))
	n, err := m.input.Write(data)
	_ = m.input.SetWriteDeadline(time.Time{})
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return execwire.CallReply{Written: n, Error: &execwire.CallError{Code: execwire.CodeStdinFull,
				Message: "the process did not read its input within " + stdinWait.String() + "; " + strconv.Itoa(n) + " of " + strconv.Itoa(len(data)) + " bytes were written"}}
		}
		return execwire.CallReply{Written: n, Error: &execwire.CallError{Code: execwire.CodeStdinClosed, Message: "write to the input: " + err.Error()}}
	}
	return execwire.CallReply{Written: n}
}

// noInput is why m's input takes no write (its inMu is held).
func (t *procTable) noInput(m *managed) execwire.CallReply {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.rec.Exit != nil {
		return failed(execwire.CodeEnded, "process "+strconv.Quote(m.rec.ID)+" has ended")
	}
	return failed(execwire.CodeStdinClosed, "process "+strconv.Quote(m.rec.ID)+" has no open input")
}

// veof is a terminal's end-of-file character (^D): what closes a terminal's input.
const veof = 0x04

func (t *procTable) closeStdin(id string) execwire.CallReply {
	m, rep := t.get(id)
	if m == nil {
		return rep
	}
	m.inMu.Lock()
	defer m.inMu.Unlock()
	if m.input == nil {
		return t.noInput(m)
	}
	if m.input == m.master {
		_ = m.input.SetWriteDeadline(time.Now().Add(stdinWait))
		_, err := m.input.Write([]byte{veof})
		_ = m.input.SetWriteDeadline(time.Time{})
		if err != nil {
			return failed(execwire.CodeStdinFull, "send end-of-file to the terminal: "+err.Error())
		}
	} else {
		m.input.Close()
	}
	m.input = nil
	t.mu.Lock()
	m.rec.Stdin = false
	t.mu.Unlock()
	return execwire.CallReply{}
}

func (t *procTable) resize(id string, size *execwire.Size) execwire.CallReply {
	m, rep := t.get(id)
	if m == nil {
		return rep
	}
	if size == nil || size.Rows == 0 || size.Cols == 0 {
		return failed(execwire.CodeInvalid, "a size needs rows and columns")
	}
	m.inMu.Lock()
	defer m.inMu.Unlock()
	if m.master == nil {
		return failed(execwire.CodeNotTTY, "process "+strconv.Quote(id)+" has no terminal")
	}
	t.mu.Lock()
	ended := m.rec.Exit != nil
	t.mu.Unlock()
	if ended {
		return failed(execwire.CodeEnded, "process "+strconv.Quote(id)+" has ended")
	}
	if err := setSize(m.master, *size); err != nil {
		return failed(execwire.CodeInvalid, "resize: "+err.Error())
	}
	t.mu.Lock()
	m.rec.TTY = size
	t.mu.Unlock()
	return execwire.CallReply{}
}
