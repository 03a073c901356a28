package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/internal/execwire"
)

// serve accepts connections until the listener fails; each runs one command.
func (s *supervisor) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and its kin: the next accept may succeed
		}
		go s.handle(c)
	}
}

// conn is one connection: frames out are serialised by mu.
type conn struct {
	c  net.Conn
	mu sync.Mutex
}

func (c *conn) send(typ byte, p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return execwire.Write(c.c, typ, p)
}

// handle greets and reads the first request: a Run (one command, followed to its end), a
// Call (the connection then carries Calls, each answered in turn) or an Attach (the
// connection then streams one process's output).
func (s *supervisor) handle(nc net.Conn) {
	defer nc.Close()
	c := &conn{c: nc}
	if c.send(execwire.Hello, []byte(execwire.Version)) != nil {
		return
	}
	typ, p, err := execwire.Read(nc, execwire.MaxPayload)
	if err != nil {
		return
	}
	switch typ {
	case execwire.Run:
		s.runOne(c, p)
	case execwire.Call:
		s.calls(c, p)
	case execwire.Attach:
		s.attach(c, p)
	}
}

// runOne runs the one command of a Run and reports its end.
func (s *supervisor) runOne(c *conn, p []byte) {
	var req execwire.Request
	if err := json.Unmarshal(p, &req); err != nil || len(req.Argv) == 0 {
		refuse(c, "runtime", "malformed request")
		return
	}
	p2, err := s.start(req)
	if err != nil {
		var f *startFailure
		if errors.As(err, &f) {
			refuse(c, f.cause, f.msg)
		}
		return
	}
	s.follow(c, p2)
}

// process is a started command: its pid (and process group), the read ends of its output
// pipes, and where its status arrives.
type process struct {
	pid      int
	out, err *os.File
	status   chan syscall.WaitStatus
}

type startFailure struct{ cause, msg string }

func (f *startFailure) Error() string { return f.msg }

func refuse(c *conn, cause, msg string) {
	b, _ := json.Marshal(execwire.StartFailure{Cause: cause, Message: msg})
	_ = c.send(execwire.NotStarted, b)
}

// start resolves the program as runc does for an exec (after changing to the working
// directory, in the command's PATH) and forks it in a session of its own with /dev/null as
// its input and two pipes as its output.
func (s *supervisor) start(req execwire.Request) (*process, error) {
	dir := req.Dir
	if dir == "" {
		dir = "/"
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	path, err := lookPath(req.Argv[0], dir, getenv(s.env, "PATH"))
	if err != nil {
		return nil, err
	}
	null, err := os.Open("/dev/null")
	if err != nil {
		return nil, &startFailure{"runtime", "open /dev/null: " + err.Error()}
	}
	defer null.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, &startFailure{"runtime", "pipe: " + err.Error()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, &startFailure{"runtime", "pipe: " + err.Error()}
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: s.env, Files: []uintptr{null.Fd(), outW.Fd(), errW.Fd()},
		Sys: &syscall.SysProcAttr{Setsid: true}}
	p := &process{out: outR, err: errR, status: make(chan syscall.WaitStatus, 1)}
	s.mu.Lock()
	pid, ferr := syscall.ForkExec(path, req.Argv, attr)
	if ferr == nil {
		p.pid = pid
		s.waiting[pid] = p.status
	}
	s.mu.Unlock()
	outW.Close()
	errW.Close()
	if ferr != nil {
		outR.Close()
		errR.Close()
		return nil, forkFailure(req.Argv[0], ferr)
	}
	return p, nil
}

// follow reports the start, streams the output, and reports the exit once the process ended
// and both pipes closed, or [execwire.PipeGrace] after its end if a process it left running
// (a server started in the background) still holds them open: docker exec answers so too, with
// its own grace. What the command wrote before it ended is sent before the Exit; the pipes are
// then read on and discarded, so the process holding them is neither blocked nor SIGPIPEd, and
// it runs on. A Kill frame kills the process group while the command has not ended; an engine
// that closes the connection without one stopped waiting, and the command runs on with its
// output discarded, as a docker exec whose client went away does.
func (s *supervisor) follow(c *conn, p *process) {
	var (
		mu    sync.Mutex
		ended bool
	)
	kill := func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		}
	}
	_ = c.send(execwire.Started, []byte(strconv.Itoa(p.pid)))
	go func() {
		for {
			typ, _, err := execwire.Read(c.c, 0)
			if err != nil {
				return
			}
			if typ == execwire.Kill {
				kill()
			}
		}
	}()
	outs := []*output{{f: p.out, typ: execwire.Stdout}, {f: p.err, typ: execwire.Stderr}}
	done := make(chan struct{}, len(outs))
	for _, o := range outs {
		go o.pump(c.send, done)
	}
	ws := <-p.status
	mu.Lock()
	ended = true
	mu.Unlock()
	drain(outs, done)
	_ = c.send(execwire.Exit, []byte(strconv.Itoa(exitCode(ws))))
}

// drain waits for each of outs' pumps to report on done, once the process itself has ended:
// for at most [execwire.PipeGrace] in all, after which the pipes a process it left running
// still holds are cut, and what was read before is sent.
func drain(outs []*output, done <-chan struct{}) {
	grace := time.NewTimer(execwire.PipeGrace)
	defer grace.Stop()
	for range outs {
		select {
		case <-done:
		case <-grace.C:
			for _, o := range outs {
				o.cut()
			}
			<-done
		}
	}
}

// output is one of a command's output pipes: the read end and the frame type it is sent as.
type output struct {
	f   *os.File
	typ byte
}

// pump sends what the pipe delivers until it closes, or until cut once the command's grace
// is spent; it reports either on done. After a cut it sends what the pipe still held, then
// reads on to io.Discard until the last writer closes. Once a send fails (the engine stopped
// waiting) it only reads, so the program is never held.
func (o *output) pump(send func(byte, []byte) error, done chan<- struct{}) {
	defer o.f.Close()
	buf := make([]byte, 32<<10)
	sending := true
	for {
		n, err := o.f.Read(buf)
		if n > 0 && sending && send(o.typ, buf[:n]) != nil {
			sending = false
		}
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && sending {
			o.flush(buf, send)
		}
		done <- struct{}{}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			_ = o.f.SetReadDeadline(time.Time{})
			_, _ = io.Copy(io.Discard, o.f)
		}
		return
	}
}

// cut ends the pump's wait for the pipe: its next (or current) read fails with
// os.ErrDeadlineExceeded.
func (o *output) cut() { _ = o.f.SetReadDeadline(time.Now()) }

// flush sends what the pipe holds at a cut, read without waiting: a read past its deadline
// fails before it reads, and the bytes the command wrote before it ended may still be in the
// pipe (a pump slowed by a slow engine). What the pipe holds is counted first (TIOCINQ, which
// is FIONREAD), so a child that keeps writing cannot keep the flush going.
func (o *output) flush(buf []byte, send func(byte, []byte) error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return
	}
	held := 0
	_ = rc.Control(func(fd uintptr) { held, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	for err == nil && held > 0 {
		n := 0
		_ = rc.Control(func(fd uintptr) { n, err = unix.Read(int(fd), buf[:min(held, len(buf))]) })
		if errors.Is(err, unix.EINTR) {
			err = nil
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		held -= n
		err = send(o.typ, buf[:n])
	}
}

// lookPath finds file as runc does for an exec's process: a name with a slash is taken as
// it is (relative to dir), any other is searched in PATH (an empty element meaning dir) for a
// regular file with an execute bit.
func lookPath(file, dir, pathEnv string) (string, error) {
	at := func(p string) string {
		if strings.HasPrefix(p, "/") {
			return p
		}
		return dir + "/" + p
	}
	if strings.Contains(file, "/") {
		if err := executable(at(file)); err != nil {
			return "", notFound(file, err)
		}
		return at(file), nil
	}
	for d := range strings.SplitSeq(pathEnv, ":") {
		if pathEnv == "" {
			break
		}
		if d == "" {
			d = "."
		}
		p := at(d + "/" + file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &startFailure{"program", "exec: " + strconv.Quote(file) + ": executable file not found in $PATH"}
}

func notFound(file string, err error) error {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return &startFailure{"program", "exec: " + strconv.Quote(file) + ": no such file or directory"}
	}
	return &startFailure{"not_executable", "exec: " + strconv.Quote(file) + ": permission denied"}
}

func executable(p string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return syscall.EISDIR
	case st.Mode&0o111 == 0:
		return syscall.EACCES
	}
	return nil
}

func getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func errText(err, otherwise error) string {
	if err == nil {
		err = otherwise
	}
	return err.Error()
}
