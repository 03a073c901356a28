package docker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// Error classes. Every error a driver method returns that comes from an engine answer wraps one of
// these (test with errors.Is) or is a bare [*CommandError] when the answer fits no class. The
// unexported ones are classes only this package branches on (doc.go, "What this package exports
// and why"); outside, they are failures of no class.
var (
	// ErrNotFound: the target container, network or image is absent. The engine's answer named
	// that exact target.
	ErrNotFound = errors.New("docker: no such object")
	// ErrPathAbsent: the guest path is absent and the engine's answer proves it (the path named as
	// a whole token in a "could not find" answer, or the older-client wording confirmed against
	// the instance ID).
	ErrPathAbsent = errors.New("docker: no such path in the container")
	// ErrPathAbsentUnconfirmed: an older client (20.10) printed "No such container:path:" for this
	// target and path. The same line is printed when the container itself is gone, so it counts
	// as path absence only after the caller has confirmed that the target is still its instance
	// (inspect it and compare the ID). Until then it is a failure.
	ErrPathAbsentUnconfirmed = errors.New("docker: path or container absent (unconfirmed)")
	// ErrConflict: create refused because the container name is in use.
	ErrConflict = errors.New("docker: container name already in use")
	// errRemovalInProgress: a forced removal refused because the daemon is already removing the
	// container (its own auto-removal of one that just exited, or another caller's removal);
	// it will be gone once that removal ends. Remove waits for it (removeForced).
	errRemovalInProgress = errors.New("docker: removal already in progress")
	// errRemovalIncomplete: a forced removal the daemon answered with an internal error (HTTP
	// 500). On this project's daemons that is the storage driver failing to release the
	// container's root filesystem while it is still settling (fuse-overlayfs: "failed to remove
	// root filesystem … directory not empty"); the container stays, marked dead, and the same
	// forced removal asked again moments later completes. A forced removal is safe to repeat (a
	// container gone by then is absent), so the API driver's Remove asks again a few times
	// (removeForced) rather than reading the daemon's text to tell this 500 from another.
	errRemovalIncomplete = errors.New("docker: removal incomplete")
	// ErrNetworkExists: network create refused because the network exists.
	ErrNetworkExists = errors.New("docker: network already exists")
	// ErrPaused: the container is paused. From exec, only for the daemon's frozen refusal (the
	// command never started); from pause, the container was already paused.
	ErrPaused = errors.New("docker: container is paused")
	// ErrFreezeFailed: pause found the container running and the freezer could not freeze it
	// (cgroup v1's freezer gives up while tasks are mid-syscall: "OCI runtime pause failed:
	// unable to freeze"). Nothing stays frozen by the daemon's account; trying again may work.
	ErrFreezeFailed = errors.New("docker: the freezer could not freeze the container")
	// ErrNotRunning: pause or exec found a container that is not running.
	ErrNotRunning = errors.New("docker: container is not running")
	// ErrUnreachable: the daemon could not be reached, the bound context is gone, or the client
	// could not be started. Never a sign that a container or path is absent.
	ErrUnreachable = errors.New("docker: engine unreachable")
	// ErrClientNotFound: a binary the engine needs could not be found: the docker client named
	// by Config.DockerPath (binding runs it), the ssh of an ssh:// endpoint, or the docker of
	// the remote host ssh reaches. It also matches ErrUnreachable.
	ErrClientNotFound = errors.New("docker: client binary not found")
	// ErrTimeout: the command outlived its own budget (Config.CommandTimeout). The caller's own
	// cancellation or deadline is never reported this way; it comes back as the context's error.
	ErrTimeout = errors.New("docker: command timed out")
	// ErrOutputLimit: an exec's combined output exceeded its byte budget; the client was killed
	// and no partial result is returned.
	ErrOutputLimit = errors.New("docker: output exceeded its byte budget")
	// errNoTarHeader: the engine's archive held no complete entry header.
	errNoTarHeader = errors.New("docker: no tar header")
	// errTarMetadata: the archive's entry metadata broke a rule of the bounded reader (oversized,
	// sparse, malformed, too many headers, negative size, bad checksum).
	errTarMetadata = errors.New("docker: refused tar metadata")
	// errShortBody: the archive ended before the entry's body did.
	errShortBody = errors.New("docker: incomplete tar body")
	// ErrCapExceeded: an entry is larger than the caller's byte cap; refused on its header.
	ErrCapExceeded = errors.New("docker: entry exceeds the byte cap")
	// ErrInvalid: an argument was refused before any engine call.
	ErrInvalid = errors.New("docker: invalid argument")
	// ErrExecNotStarted: the container runtime could not start an exec's process (runc's
	// "exec failed": a missing working directory or program, a program it may not execute,
	// an unknown user). Nothing ran in the container.
	ErrExecNotStarted = errors.New("docker: the runtime could not start the process")
)

// CommandError is a client invocation that exited non-zero. Class is the error class the answer
// was classified into (nil when it fits none); errors.Is(err, ErrNotFound) and friends see it
// through Unwrap.
type CommandError struct {
	Args     []string // the arguments after the binary and the bound context
	ExitCode int
	Stderr   []byte // exactly as the client wrote it
	Class    error
}

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(stderrText(e.Stderr))
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("docker %s: exited %d: %s", renderArgs(e.Args), e.ExitCode, msg)
}

// Unwrap returns the class.
func (e *CommandError) Unwrap() error { return e.Class }

// TimeoutError is an invocation that outlived its own budget. It matches [ErrTimeout]. The child
// was killed and reaped before it was returned.
type TimeoutError struct {
	Args    []string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("docker %s: exceeded its %s budget", renderArgs(e.Args), e.Timeout)
}

// Is reports ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// CapExceededError is an archive entry whose header size is above the caller's cap. The body was
// never read. It matches [ErrCapExceeded].
type CapExceededError struct {
	Path string
	Size int64
	Cap  int64
}

func (e *CapExceededError) Error() string {
	return fmt.Sprintf("docker: %s is %d bytes and the caller allowed %d", e.Path, e.Size, e.Cap)
}

// Is reports ErrCapExceeded.
func (e *CapExceededError) Is(target error) bool { return target == ErrCapExceeded }

// shortBodyError is an archive entry whose body ended early. It matches [errShortBody].
type shortBodyError struct {
	Path     string
	Expected int64
	Received int64
}

func (e *shortBodyError) Error() string {
	return fmt.Sprintf("docker: incomplete body for %s: expected %d bytes, received %d", e.Path, e.Expected, e.Received)
}

// Is reports errShortBody.
func (e *shortBodyError) Is(target error) bool { return target == errShortBody }

// OutputLimitError is an exec whose combined stdout and stderr went over its budget. It matches
// [ErrOutputLimit].
type OutputLimitError struct {
	Limit int64
}

func (e *OutputLimitError) Error() string {
	return fmt.Sprintf("docker: output exceeded its byte budget of %d", e.Limit)
}

// Is reports ErrOutputLimit.
func (e *OutputLimitError) Is(target error) bool { return target == ErrOutputLimit }

// ExecStartError is an exec whose process the container runtime could not start: the daemon
// answered with the runtime's words where the program's output would be, and an exit status
// (126 on a 20.10 daemon) no program produced. It matches [ErrExecNotStarted]; Output is what
// the driver read, for a caller that wants the daemon's answer as it came.
type ExecStartError struct {
	Args    []string
	Cause   sandbox.StartFailure
	Message string // the runtime's line, without its CRLF
	Output  ExecOutput
}

func (e *ExecStartError) Error() string {
	return fmt.Sprintf("docker %s: the runtime could not start the process: %s", renderArgs(e.Args), e.Message)
}

// Is reports ErrExecNotStarted.
func (e *ExecStartError) Is(target error) bool { return target == ErrExecNotStarted }

// renderArgs shortens an argument list for messages: run carries every label.
func renderArgs(args []string) string {
	const keep = 8
	if len(args) <= keep {
		return strings.Join(args, " ")
	}
	return strings.Join(args[:keep], " ") + " …"
}

// stderrText is the UTF-8 replacement-decoded view of client output.
func stderrText(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }
