package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/internal/execwire"
)

// ptyStream is the pump's frame type for a terminal's one stream (never sent as a frame).
const ptyStream byte = 'T'

// procIO is a process's standard descriptors: the child's ends, passed at fork and closed
// after it, and the supervisor's.
type procIO struct {
	child   []uintptr // stdin, stdout, stderr of the child
	closers []*os.File
	input   *os.File // what a stdin write goes to; nil when the input is /dev/null
	master  *os.File // the terminal's master; nil without a terminal
	outputs []*output
	parent  []*os.File // the supervisor's ends, closed if the fork fails
}

// closeChild closes the supervisor's copies of the child's ends: the output pipes then close
// when the last process holding them does.
func (p *procIO) closeChild() {
	for _, f := range p.closers {
		f.Close()
	}
}

func (p *procIO) closeParent() {
	for _, f := range p.parent {
		f.Close()
	}
}

// openIO makes req's descriptors: a terminal, or pipes for the output and (with Stdin) the
// input, /dev/null otherwise.
func openIO(req *execwire.StartRequest) (*procIO, error) {
	if req.TTY != nil {
		return openTerminal(*req.TTY)
	}
	p := &procIO{}
	fail := func(what string, err error) (*procIO, error) {
		p.closeChild()
		p.closeParent()
		return nil, &startFailure{"runtime", what + ": " + err.Error()}
	}
	var in *os.File
	if req.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return fail("pipe", err)
		}
		in, p.input = r, w
		p.parent = append(p.parent, w)
	} else {
		null, err := os.Open("/dev/null")
		if err != nil {
			return fail("open /dev/null", err)
		}
		in = null
	}
	p.closers = append(p.closers, in)
	outR, outW, err := os.Pipe()
	if err != nil {
		return fail("pipe", err)
	}
	p.closers, p.parent = append(p.closers, outW), append(p.parent, outR)
	errR, errW, err := os.Pipe()
	if err != nil {
		return fail("pipe", err)
	}
	p.closers, p.parent = append(p.closers, errW), append(p.parent, errR)
	p.child = []uintptr{in.Fd(), outW.Fd(), errW.Fd()}
	p.outputs = []*output{{f: outR, typ: execwire.Stdout}, {f: errR, typ: execwire.Stderr}}
	return p, nil
}

// openTerminal opens a terminal of size: its master stays here (the input, resizes, and a
// duplicate of it the output is read from), its peer becomes the child's standard
// descriptors. The peer is opened from the master itself (TIOCGPTPEER), never by a path the
// guest could have changed.
func openTerminal(size execwire.Size) (*procIO, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, &startFailure{"runtime", "open a terminal: " + err.Error()}
	}
	fail := func(what string, err error, files ...*os.File) (*procIO, error) {
		master.Close()
		for _, f := range files {
			f.Close()
		}
		return nil, &startFailure{"runtime", what + ": " + err.Error()}
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return fail("open a terminal", err)
	}
	var peer, dup int
	var ierr error
	cerr := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		if ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); ierr != nil {
			return
		}
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if errno != 0 {
			ierr = errno
			return
		}
		peer = int(r)
		dup, ierr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil || ierr != nil {
		if peer > 0 {
			unix.Close(peer)
		}
		return fail("open a terminal", firstErr(cerr, ierr))
	}
	slave := os.NewFile(uintptr(peer), "pty")
	out := os.NewFile(uintptr(dup), "ptmx")
	return &procIO{child: []uintptr{slave.Fd(), slave.Fd(), slave.Fd()}, closers: []*os.File{slave},
		input: master, master: master, outputs: []*output{{f: out, typ: ptyStream}}, parent: []*os.File{master, out}}, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// setSize sets a terminal's size on its master.
func setSize(master *os.File, size execwire.Size) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	}); err != nil {
		return err
	}
	return ierr
}
