// Command gate is the first process of an allowlisted workload (docs/architecture.md, "The
// workload gate"): run as "/maf-sandbox-gate PROXY TOKEN COMMAND...", it waits until the
// sandbox's proxy, dialled at PROXY (ADDRESS:PORT on the internal network), hands it TOKEN —
// the proxy listens for that only once its seal probe passed — or until the release file
// exists, its own path followed by "." and TOKEN (the engine writes it before it starts a
// stopped gated workload again), and then execve()s COMMAND in its place: the image's own
// entrypoint and command, with the environment, working directory and user the container
// gave the gate, unchanged. So the container can be started while its network is still
// being proved and no code of the image runs before the proof.
//
// COMMAND is resolved the way runc resolves a container's first process (a name without a
// slash is looked up in the container's PATH), and before the wait, so that an image whose
// command is absent fails at once, as its start would have. The program uses the standard
// library only; its one socket is closed before the exec, so the image's process inherits
// its descriptors as runc left them.
package main

import (
	"crypto/subtle"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// usage names the arguments; the engine looks for it in the binary to know the gate speaks
// this release (actors/egress_run.go, gateProtocol), so the two change together.
const usage = "usage: maf-sandbox-gate PROXY TOKEN COMMAND [ARG...]"

const (
	// poll is the pause between two tries: a refused dial (the proxy not sealed yet) and a
	// stat of the release file are both cheap.
	poll = 2 * time.Millisecond
	// dialBudget bounds one try at the proxy, on the same segment: a present address
	// answers in well under a millisecond; the proxy's own interface may not be up yet.
	dialBudget = 50 * time.Millisecond
	// readBudget bounds reading the token once connected.
	readBudget = time.Second
)

// init keeps main on the process's first thread, so that the exec below is made by the thread
// group's leader. An exec from any other thread makes the kernel retire the leader and hand its
// PID to the exec'ing thread, and in between /proc/<pid>/root of the container's first process
// reads as gone (ENOENT: the retired leader has no filesystem any more). The engine's host
// file plane proves and opens that very process as the gate releases it, so it took a live
// workload for a dead one (a 250-sandbox run failed an acquire so: "the container's process is
// gone").
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) < 4 {
		fail(2, usage)
	}
	token, argv := os.Args[2], os.Args[3:]
	proxy, err := netip.ParseAddrPort(os.Args[1])
	if err != nil || !proxy.Addr().Is4() {
		fail(2, "PROXY is not an IPv4 ADDRESS:PORT: "+os.Args[1])
	}
	release := os.Args[0] + "." + token
	path, err := lookPath(argv[0])
	if err != nil {
		fail(127, err.Error())
	}
	for !released(release, proxy, token) {
		time.Sleep(poll)
	}
	err = syscall.Exec(path, argv, os.Environ())
	fail(126, "exec "+argv[0]+": "+err.Error())
}

// released is one try: the release file is there, or the proxy handed over the token.
func released(release string, proxy netip.AddrPort, token string) bool {
	var st syscall.Stat_t
	if syscall.Lstat(release, &st) == nil {
		return true
	}
	// A raw socket call keeps the net package (and a third of the binary) out. The timeouts
	// bound connect (Linux applies SO_SNDTIMEO to it) and the read.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	dial, read := syscall.NsecToTimeval(dialBudget.Nanoseconds()), syscall.NsecToTimeval(readBudget.Nanoseconds())
	if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &dial) != nil ||
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &read) != nil {
		return false
	}
	if syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(proxy.Port()), Addr: proxy.Addr().As4()}) != nil {
		return false
	}
	want := token + "\n"
	got := make([]byte, 0, len(want))
	buf := make([]byte, len(want))
	for len(got) < len(want) {
		n, err := syscall.Read(fd, buf[:len(want)-len(got)])
		if err != nil || n <= 0 {
			return false
		}
		got = append(got, buf[:n]...)
	}
	return subtle.ConstantTimeCompare(got, []byte(want)) == 1
}

// lookPath is os/exec.LookPath as runc applies it to a container's first process: a name
// with a slash is taken as it is (relative to the working directory), any other is searched
// in PATH (an empty element meaning the working directory) for a regular file with an
// execute bit.
func lookPath(file string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", &os.PathError{Op: "exec", Path: file, Err: err}
		}
		return file, nil
	}
	env := os.Getenv("PATH")
	for _, dir := range strings.Split(env, ":") {
		if env == "" {
			break
		}
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &os.PathError{Op: "exec", Path: file, Err: syscall.ENOENT}
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

func fail(code int, msg string) {
	os.Stderr.WriteString("maf-sandbox-gate: " + msg + "\n")
	os.Exit(code)
}
