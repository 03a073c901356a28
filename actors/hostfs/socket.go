package hostfs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrNotListener is a socket path inside the container that is not the proven process's own
// listening socket: a link, a FIFO or another file at the path, nothing listening, or a
// listener some other process bound (SO_PEERCRED names its pid). The caller does not use it.
var ErrNotListener = errors.New("hostfs: not the container process's socket")

// socketResolve confines the lookup to the container's root ("/" and ".." stay inside it) and
// refuses every link on the way, magic or not.
const socketResolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// DialUnix connects to the unix socket at abs, resolved inside the proven process's root with
// openat2 (no links, no escape), and only when the listener is that process itself: the
// peer's pid (SO_PEERCRED, the listener's creator) is the proven pid, and the process is still
// alive afterwards, so the pid was not reused. The socket is reached through its O_PATH
// handle (/proc/self/fd/N): the path is never resolved again. The connect does not block: a
// listener whose backlog is full is refused, not waited for.
func (r *Root) DialUnix(abs string) (*net.UnixConn, error) {
	root, err := r.openRoot()
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: socketResolve}
	pfd, err := unix.Openat2(root, rel(abs), how)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", ErrNotListener, abs, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, fmt.Errorf("%w: stat %s: %w", ErrNotListener, abs, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%w: %s is not a socket (mode %o)", ErrNotListener, abs, st.Mode&unix.S_IFMT)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("hostfs: socket: %w", err)
	}
	f := os.NewFile(uintptr(s), "exec-channel")
	defer f.Close() // FileConn holds its own duplicate
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: "/proc/self/fd/" + strconv.Itoa(pfd)}); err != nil {
		return nil, fmt.Errorf("%w: connect %s: %w", ErrNotListener, abs, err)
	}
	cred, err := unix.GetsockoptUcred(s, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return nil, fmt.Errorf("hostfs: peer of %s: %w", abs, err)
	}
	if int(cred.Pid) != r.pid {
		return nil, fmt.Errorf("%w: %s is held by pid %d, not the container's process %d", ErrNotListener, abs, cred.Pid, r.pid)
	}
	if !r.Alive() {
		return nil, fmt.Errorf("%w: the process ended", ErrStale)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("hostfs: %w", err)
	}
	return c.(*net.UnixConn), nil
}
