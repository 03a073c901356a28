package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// An ssh:// endpoint is reached the way the docker client reaches it: every connection is one
// `ssh` process that runs `docker system dial-stdio` on the remote host, which joins its stdin
// and stdout to the remote daemon's socket. The engine speaks the Engine API over that stream.
//
// The engine does not use the docker CLI's connection helper (github.com/docker/cli/cli/
// connhelper), although it links small (about 140 KB and one logging module): its ssh process
// gets the live environment at every dial (os.Environ), which a binding must never follow, and
// it reports ssh's end only as text, from which a caller could tell "no docker on the remote
// host" from "ssh refused" only by reading it. Here the ssh binary is found and the environment
// taken once, at binding, and ssh's exit status is kept in [*SSHError].

// sshExitOwn is the status ssh exits with when it fails itself: it could not connect,
// authenticate or verify the host's key, or the connection dropped.
const sshExitOwn = 255

// sshExitNoCommand is the status of a remote shell that found no such command: here, no docker.
const sshExitNoCommand = 127

// sshExitWait bounds how long a connection whose stream has ended waits for ssh's exit status.
const sshExitWait = 3 * time.Second

// sshStderrMax bounds what a connection keeps of ssh's stderr (its last bytes).
const sshStderrMax = 4 << 10

// SSHError is an ssh:// connection that ended on a failure: ssh could not connect, authenticate
// or verify the host's key, or the connection dropped (ExitCode 255); the remote host has no
// docker command (127); or the remote `docker system dial-stdio` failed, as when it cannot
// reach the remote daemon (any other status; -1 when ssh ended on a signal). Which of the
// failures of 255 it was, ssh says in Stderr, for a person to read. It matches
// [ErrUnreachable], and also [ErrClientNotFound] when the remote host has no docker.
type SSHError struct {
	Host     string // the endpoint's [user@]host[:port]
	ExitCode int
	Stderr   []byte // the last bytes ssh and the remote command wrote to stderr
}

func (e *SSHError) Error() string {
	why := fmt.Sprintf("docker system dial-stdio failed on the remote host (exit %d)", e.ExitCode)
	switch e.ExitCode {
	case sshExitOwn:
		why = "ssh could not connect, authenticate or verify the host key, or the connection dropped (exit 255)"
	case sshExitNoCommand:
		why = "the remote host has no docker command (exit 127)"
	case -1:
		why = "ssh ended on a signal"
	}
	msg := strings.TrimSpace(stderrText(e.Stderr))
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("ssh %s: %s: %s", e.Host, why, msg)
}

// Is reports [ErrUnreachable], and [ErrClientNotFound] for a remote host without docker.
func (e *SSHError) Is(target error) bool {
	return target == ErrUnreachable || (target == ErrClientNotFound && e.ExitCode == sshExitNoCommand)
}

// sshWitness keeps the ssh failure of the connections one call made. The Moby client replaces
// some connection errors with a message of its own (it matches "connection refused" or "dial
// unix" in the error's text, which ssh and the remote docker write), so the [*SSHError] can be
// lost before the call returns; the call's own error is then settled from the witness
// ([sshWitness.settle]). It rides in the call's context, which the HTTP transport hands the
// dialer.
type sshWitness struct {
	mu  sync.Mutex
	err *SSHError
}

type witnessKey struct{}

// withSSHWitness returns ctx carrying a fresh witness, and the witness.
func withSSHWitness(ctx context.Context) (context.Context, *sshWitness) {
	w := &sshWitness{}
	return context.WithValue(ctx, witnessKey{}, w), w
}

func (w *sshWitness) note(e *SSHError) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = e
	}
}

// settle returns err, or, when a connection of the call ended on an ssh failure that err no
// longer carries, that failure under op: it is why the call failed.
func (w *sshWitness) settle(op string, err error) error {
	w.mu.Lock()
	se := w.err
	w.mu.Unlock()
	var carried *SSHError
	if err == nil || se == nil || errors.As(err, &carried) {
		return err
	}
	return fmt.Errorf("docker %s: %w", op, se)
}

// sshDialer starts one ssh process per connection: the binary found on the captured PATH at
// binding, the captured environment, and the arguments of the endpoint.
type sshDialer struct {
	bin  string
	env  []string
	args []string
	host string // [user@]host[:port], for messages
}

// newSSHDialer parses an ssh://[user@]host[:port][/socket] endpoint as the docker client does
// (no password, query or fragment) and finds ssh on the captured PATH. A socket path names the
// remote daemon's socket (`docker --host unix://<path> system dial-stdio`). ssh runs with
// BatchMode, since the engine has no terminal to answer a password, passphrase or unknown host
// key with: each of those is refused instead of asked, so only a host whose key the known-hosts
// files hold is reached. Everything else (keys, known hosts, proxies, multiplexing) is the
// user's ssh configuration.
func newSSHDialer(endpoint string, env []string) (*sshDialer, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: ssh endpoint: %w", ErrUnreachable, err)
	}
	refuse := func(why string) (*sshDialer, error) {
		return nil, fmt.Errorf("%w: ssh endpoint %s: %s", ErrUnreachable, u.Redacted(), why)
	}
	_, hasPassword := u.User.Password()
	switch {
	case hasPassword:
		return refuse("a password in the URL is not supported; use a key")
	case u.RawQuery != "" || u.Fragment != "":
		return refuse("a query or fragment is not allowed")
	case u.Hostname() == "":
		return refuse("no host")
	case strings.HasPrefix(u.Hostname(), "-") || strings.HasPrefix(u.User.Username(), "-"):
		return refuse("a host or user may not start with '-'")
	case strings.ContainsAny(u.Path, "'\x00\n\r"):
		return refuse("the socket path holds a quote or a control character")
	}
	bin, err := lookPath("ssh", envValue(env, "PATH"), "PATH so that it holds OpenSSH's ssh")
	if err != nil {
		return nil, err
	}
	args := []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T"}
	if user := u.User.Username(); user != "" {
		args = append(args, "-l", user)
	}
	if port := u.Port(); port != "" {
		args = append(args, "-p", port)
	}
	remote := "docker system dial-stdio"
	if strings.Trim(u.Path, "/") != "" {
		// The remote shell reads the command: the path is single-quoted, and holds no quote.
		remote = "docker '--host=unix://" + u.Path + "' system dial-stdio"
	}
	args = append(args, "--", u.Hostname(), remote)
	host := u.Host
	if u.User.Username() != "" {
		host = u.User.Username() + "@" + u.Host
	}
	return &sshDialer{bin: bin, env: env, args: args, host: host}, nil
}

// dial starts ssh and returns its stream as a connection. The process lives until the
// connection is closed (the HTTP transport closes it after every call), never past it.
func (d *sshDialer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: ssh %s: %w", ErrUnreachable, d.host, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("%w: ssh %s: %w", ErrUnreachable, d.host, err)
	}
	c := &sshConn{host: d.host, w: inW, r: outR, stderr: &tailBuffer{max: sshStderrMax}, exited: make(chan struct{})}
	c.witness, _ = ctx.Value(witnessKey{}).(*sshWitness)
	cmd := exec.Command(d.bin, d.args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = d.env, inR, outW, c.stderr
	// A session of its own: ssh has no terminal to prompt on, and its group (a ProxyCommand
	// included) is killed as one. Pdeathsig ends it with the engine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("%w: %w: start ssh for %s: %w", ErrUnreachable, ErrClientNotFound, d.host, err)
		}
		return nil, fmt.Errorf("%w: start ssh for %s: %w", ErrUnreachable, d.host, err)
	}
	c.cmd = cmd
	go c.wait()
	return c, nil
}

// sshConn is the stream of one ssh process: writes go to its stdin, reads come from its stdout.
// When the stream ends on a failure of ssh or of the remote command, reads and writes return
// its [*SSHError].
type sshConn struct {
	host    string
	witness *sshWitness // the call's, or nil
	cmd     *exec.Cmd
	w       *os.File // ssh's stdin
	r       *os.File // ssh's stdout
	stderr  *tailBuffer

	exited  chan struct{} // closed once ssh is reaped; waitErr is set then
	waitErr error

	closed    atomic.Bool
	closeOnce sync.Once
}

// wait reaps ssh.
func (c *sshConn) wait() {
	c.waitErr = c.cmd.Wait()
	close(c.exited)
}

// ended is the error of a read that met the end of ssh's stdout, or a write that met the end
// of its stdin: ssh's failure ([*SSHError]) when it exited on one, err itself otherwise (a
// clean end, or a connection this side closed).
func (c *sshConn) ended(err error) error {
	if c.closed.Load() {
		return err
	}
	t := time.NewTimer(sshExitWait)
	defer t.Stop()
	select {
	case <-c.exited:
	case <-t.C:
		return err
	}
	var exit *exec.ExitError
	if !errors.As(c.waitErr, &exit) {
		return err
	}
	se := &SSHError{Host: c.host, ExitCode: exit.ExitCode(), Stderr: c.stderr.bytes()}
	c.witness.note(se)
	return se
}

// Read reads from ssh's stdout.
func (c *sshConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		err = c.ended(err)
	}
	return n, err
}

// Write writes to ssh's stdin.
func (c *sshConn) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		err = c.ended(err)
	}
	return n, err
}

// CloseWrite closes ssh's stdin: the remote end reads EOF.
func (c *sshConn) CloseWrite() error { return c.w.Close() }

// Close ends ssh (and the group it leads), reaps it and closes both pipes. It is safe to call
// more than once.
func (c *sshConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		select {
		case <-c.exited:
		default:
			// Not yet reaped, so the group's ID is still ssh's: what ssh started goes too.
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		}
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.w.Close()
		c.r.Close()
	})
	return nil
}

func (c *sshConn) LocalAddr() net.Addr  { return sshAddr("local") }
func (c *sshConn) RemoteAddr() net.Addr { return sshAddr(c.host) }

// SetDeadline sets the deadline of both pipes.
func (c *sshConn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}

// SetReadDeadline sets the deadline of ssh's stdout.
func (c *sshConn) SetReadDeadline(t time.Time) error { return c.r.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of ssh's stdin.
func (c *sshConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

// sshAddr names an end of an ssh stream.
type sshAddr string

func (a sshAddr) Network() string { return "ssh" }
func (a sshAddr) String() string  { return string(a) }

// tailBuffer keeps the last max bytes written to it; ssh's stderr is copied into it while
// the connection is read.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
