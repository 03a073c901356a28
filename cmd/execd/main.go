// Command execd is the exec channel's supervisor (docs/architecture.md, "The exec channel"):
// the first process of a closed sandbox instead of `sleep infinity`. It keeps the container
// alive as sleep did, reaps every orphan (it is PID 1), and listens on a unix socket inside the
// container (execwire.Socket, in a directory of mode 0700) for the engine, which reaches it
// through the container process's root on the host, never a mount or the network.
//
// Each connection runs one command as docker exec would run it: runc started this process
// with the container's user, groups, capabilities, rlimits, umask, cgroup and environment
// (Config.Env, HOSTNAME, HOME), exactly what it gives an exec's process, so a command
// inherits them unchanged; only the working directory is the request's, and its standard
// input is /dev/null. The command gets a session (and process group) of its own, so a kill
// reaches everything it started. Its arguments are ignored: they are what the container would
// have run (sleep infinity) and name it in `docker ps`.
//
// The program is dumpable-off (a guest without CAP_SYS_PTRACE cannot open its memory or
// descriptors) and handles every catchable signal without dying: PID 1 of a namespace ignores
// what it has no handler for, but Go's own handlers would exit. If it cannot listen (a
// read-only or foreign-owned root) it still keeps the container alive and reaps: the engine
// then finds no channel and takes docker exec.
package main

import (
	"net"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mafsandbox/engine/internal/execwire"
)

func main() {
	env := os.Environ() // what runc gave the container's process: every command gets it
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	s := &supervisor{env: env, waiting: map[int]chan syscall.WaitStatus{}}
	s.procs = newProcTable(s)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs) // every signal handled: none ends PID 1; children get default actions back at exec
	if ln, err := listen(); err != nil {
		os.Stderr.WriteString("maf-sandbox-execd: no exec channel: " + err.Error() + "\n")
	} else {
		go s.serve(ln)
	}
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			s.reap()
		}
	}
}

// listen makes the socket's directory (0700, the supervisor's own user) and listens in it. A
// leftover socket of an earlier start is removed first; anything else at the path stays and
// the listen fails.
func listen() (net.Listener, error) {
	if err := os.Mkdir(execwire.SocketDir, 0o700); err != nil && !os.IsExist(err) {
		return nil, err
	}
	if err := os.Chmod(execwire.SocketDir, 0o700); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if unix.Lstat(execwire.Socket, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		_ = os.Remove(execwire.Socket)
	}
	ln, err := net.Listen("unix", execwire.Socket)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	return ln, nil
}
