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

// handle greets, reads the one request, runs it and reports its end.
func (s *supervisor) handle(nc net.Conn) {
	defer nc.Close()
	c := &conn{c: nc}
	if c.send(execwire.Hello, []byte(execwire.Version)) != nil {
		return
	}
	typ, p, err := execwire.Read(nc, execwire.MaxPayload)
	if err != nil || typ != execwire.Run {
		return
	}
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
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, &startFailure{"work_dir", "chdir to cwd (" + strconv.Quote(dir) + ") set in config.json failed: " + errText(err, syscall.ENOTDIR)}
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
		cause := "runtime"
		switch {
		case errors.Is(ferr, syscall.EACCES), errors.Is(ferr, syscall.EISDIR):
			cause = "not_executable"
		case errors.Is(ferr, syscall.ENOENT):
			cause = "program"
		}
		return nil, &startFailure{cause, "exec: " + strconv.Quote(req.Argv[0]) + ": " + ferr.Error()}
	}
	return p, nil
}

// follow reports the start, streams the output, and reports the exit once the process ended
// and both pipes closed. A Kill frame kills the process group while the command has not
// ended; an engine that closes the connection without one stopped waiting, and the command
// runs on with its output discarded, as a docker exec whose client went away does.
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
	var wg sync.WaitGroup
	for _, st := range []struct {
		f   *os.File
		typ byte
	}{{p.out, execwire.Stdout}, {p.err, execwire.Stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.f.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := st.f.Read(buf)
				if n > 0 && c.send(st.typ, buf[:n]) != nil {
					_, _ = io.Copy(io.Discard, st.f) // the engine stopped waiting: drain so the program is not held
					return
				}
				if err != nil {
					return
				}
			}
		}()
	}
	ws := <-p.status
	mu.Lock()
	ended = true
	mu.Unlock()
	wg.Wait()
	_ = c.send(execwire.Exit, []byte(strconv.Itoa(exitCode(ws))))
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
