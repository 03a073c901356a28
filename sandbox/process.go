package sandbox

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ProcessRunner is implemented by sandboxes that run processes living across calls: started
// once, then read, written to, resized, signalled and waited for by later calls, by this
// caller or another allowed the sandbox. A backend that offers it declares the [Processes]
// capability, so a router refuses a spec requiring processes where it does not.
//
// A process's output is numbered: the sequence of a byte is its offset in everything the
// process wrote (stdout and stderr together, in the order the backend read them, or its
// terminal's one stream), so a reader that knows how many bytes it has read resumes exactly
// there. What the backend no longer holds (its retention cut it) is reported to the reader as
// an [OutputCut], never skipped silently.
type ProcessRunner interface {
	// StartProcess starts spec's process and returns it once it runs. A spec naming an ID
	// that a process of this sandbox already has returns that process (Created false) when
	// it was started with the same command and settings, and fails with
	// [*ProcessExistsError] otherwise. A program that cannot be started fails with
	// [*ProcessStartError]; too many processes with [*ProcessLimitError]; either way nothing
	// was started.
	StartProcess(ctx context.Context, spec ProcessSpec) (Process, error)
	// ListProcesses lists the sandbox's processes, running and ended, in start order.
	ListProcesses(ctx context.Context) ([]Process, error)
	// ReadProcessOutput reads id's output from sequence from: at most opts.MaxBytes, and
	// waiting up to opts.Wait for output when none is there yet. An unknown id fails with
	// [*ProcessNotFoundError].
	ReadProcessOutput(ctx context.Context, id string, from int64, opts ReadOptions) (ProcessOutput, error)
	// WriteProcessStdin writes p to id's standard input (its terminal's, with one). A process
	// started without stdin, or whose input was closed, fails with [*StdinClosedError]; one
	// that ended with [*ProcessEndedError]; more than the backend takes at once with
	// [*ProcessLimitError].
	WriteProcessStdin(ctx context.Context, id string, p []byte) error
	// CloseProcessStdin closes id's standard input (on a terminal: sends its end-of-file
	// character).
	CloseProcessStdin(ctx context.Context, id string) error
	// ResizeProcess sets the size of id's terminal; a process without one fails with
	// [*InvalidArgumentError].
	ResizeProcess(ctx context.Context, id string, size TerminalSize) error
	// SignalProcess sends sig to id's process group.
	SignalProcess(ctx context.Context, id string, sig Signal) error
	// WaitProcess waits until id has ended and its output is complete, or ctx ends.
	WaitProcess(ctx context.Context, id string) (Process, error)
}

// ProcessSpec is what StartProcess runs.
type ProcessSpec struct {
	// ID names the process within its sandbox: 1-64 of A-Z a-z 0-9 _ -. Empty: the backend
	// chooses one. A start retried with the same ID returns the same process.
	ID      string
	Command Command
	Env     []string // NAME=value, laid over the sandbox's environment
	WorkDir string   // as Exec's wd
	User    string   // "" is the sandbox's user; else user[:group], as docker exec -u
	// Terminal, when set, gives the process a terminal of that size (one output stream,
	// stdin through it); nil gives it pipes.
	Terminal *TerminalSize
	Stdin    bool          // keep its standard input open for WriteProcessStdin; false: /dev/null
	Timeout  time.Duration // > 0: killed after that long (ExitTimedOut); 0: none
	// Retention, when set, narrows how much of its output is kept and for how long; the
	// backend's own retention is the most it may ask.
	Retention *OutputRetention
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Rows, Cols uint16
}

// OutputRetention is how much of a process's output is kept: the last Bytes (0: the
// backend's default) for at most Age (0: the backend's default).
type OutputRetention struct {
	Bytes int64
	Age   time.Duration
}

// MaxProcessIDLength bounds a process ID.
const MaxProcessIDLength = 64

// CheckProcessID refuses an ID outside the grammar (1-64 of A-Z a-z 0-9 _ -), which keeps
// it usable as a NATS subject token and a file name.
func CheckProcessID(id string) error {
	if id == "" || len(id) > MaxProcessIDLength {
		return &InvalidArgumentError{Reason: fmt.Sprintf("a process ID is 1 to %d characters, got %d", MaxProcessIDLength, len(id))}
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return &InvalidArgumentError{Reason: fmt.Sprintf("process ID %q holds %q: only letters, digits, '_' and '-' may", id, r)}
		}
	}
	return nil
}

// Validate refuses a spec no backend could start: a bad ID, a bad command, an environment
// entry without a name, a terminal of no size, a negative timeout or retention.
func (s ProcessSpec) Validate() error {
	if s.ID != "" {
		if err := CheckProcessID(s.ID); err != nil {
			return err
		}
	}
	if err := s.Command.Validate(); err != nil {
		return err
	}
	for _, kv := range s.Env {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return &InvalidArgumentError{Reason: fmt.Sprintf("environment entry %q is not NAME=value", kv)}
		}
	}
	switch {
	case s.Terminal != nil && (s.Terminal.Rows == 0 || s.Terminal.Cols == 0):
		return &InvalidArgumentError{Reason: "a terminal needs at least one row and one column"}
	case s.Timeout < 0:
		return &InvalidArgumentError{Reason: "a process timeout is positive, or zero for none"}
	case s.Retention != nil && (s.Retention.Bytes < 0 || s.Retention.Age < 0):
		return &InvalidArgumentError{Reason: "an output retention is positive, or zero for the backend's default"}
	}
	return nil
}

// ProcessState is where a process is in its life.
type ProcessState string

// Process states.
const (
	ProcessStateRunning ProcessState = "running"
	ProcessStateExited  ProcessState = "exited" // ended, however: Exit says how
)

// ExitReason is why a process ended.
type ExitReason string

// Exit reasons.
const (
	ExitExited    ExitReason = "exited"             // it exited by itself; ExitCode is its status
	ExitSignalled ExitReason = "signalled"          // a signal ended it (Signal)
	ExitTimedOut  ExitReason = "timed_out"          // killed at its timeout
	ExitOOMKilled ExitReason = "oom_killed"         // the kernel killed it for memory, as the container's memory accounting records
	ExitDisposed  ExitReason = "killed_at_disposal" // killed because its sandbox was disposed
	ExitLost      ExitReason = "lost"               // its end is unknown: the engine that followed it stopped, and it could not be followed again
)

// ExitReasons lists every reason.
func ExitReasons() []ExitReason {
	return []ExitReason{ExitExited, ExitSignalled, ExitTimedOut, ExitOOMKilled, ExitDisposed, ExitLost}
}

// ProcessExit is how a process ended.
type ProcessExit struct {
	Reason   ExitReason
	ExitCode int    // the status with ExitExited; 128 + the signal when a signal ended it; -1 when lost
	Signal   Signal // the signal that ended it; 0 when none did
	At       time.Time
}

// ProcessTransport is how a backend runs a process.
type ProcessTransport string

// Transports.
const (
	// TransportSupervisor: the sandbox's own supervisor owns the process, which outlives the
	// engine that started it.
	TransportSupervisor ProcessTransport = "supervisor"
	// TransportDockerExec: a docker exec the engine follows; it takes no stdin, terminal,
	// signal or timeout, and after the engine's restart it is reported lost.
	TransportDockerExec ProcessTransport = "docker_exec"
)

// Process is what a backend knows of one process.
type Process struct {
	ID        string
	PID       int // in the sandbox's namespace; 0 when unknown
	Argv      []string
	WorkDir   string
	Terminal  *TerminalSize
	Stdin     bool // its input is open for writes
	State     ProcessState
	StartedAt time.Time
	Exit      *ProcessExit // nil while it runs
	Output    int64        // the bytes it has written so far (the sequence after the last)
	Transport ProcessTransport
	// Durable: the process outlives the engine that started it (TransportSupervisor).
	Durable bool
	// Created: the start that returned this made the process (false: an ID's repeat).
	Created bool
	// Retention is what the process asked of its output's retention; nil: the backend's.
	Retention *OutputRetention
}

// ReadOptions bound one read of a process's output.
type ReadOptions struct {
	MaxBytes int64         // at most this many bytes (0: the backend's default)
	Wait     time.Duration // with no output at the sequence yet, wait this long for some
}

// Output streams of a chunk.
const (
	StreamStdout   = "stdout"
	StreamStderr   = "stderr"
	StreamTerminal = "pty" // a terminal's one stream
)

// OutputChunk is one piece of a process's output.
type OutputChunk struct {
	Seq    int64  // the sequence of Data[0]
	Stream string // StreamStdout, StreamStderr or StreamTerminal
	Data   []byte
}

// End is the sequence after the chunk's last byte.
func (c OutputChunk) End() int64 { return c.Seq + int64(len(c.Data)) }

// OutputCut is output no longer held: the bytes [From, To), To - From of them. Reason says
// what cut them: "retention" (the stored output's bytes or age) or "buffer" (written faster
// than it was stored, beyond what the sandbox holds meanwhile).
type OutputCut struct {
	From, To int64
	Reason   string
}

// Bytes is how many bytes were cut.
func (c OutputCut) Bytes() int64 { return c.To - c.From }

// ProcessOutput is one read of a process's output: a cut first, when the read's sequence is
// no longer held, then the chunks in order. Next is the sequence to read from next; Exit is
// set once the process has ended and Next is the end of its output.
type ProcessOutput struct {
	Cut    *OutputCut
	Chunks []OutputChunk
	Next   int64
	Exit   *ProcessExit
}

// Signal is a signal by number.
type Signal int

// The signals a caller names most.
const (
	SIGHUP  Signal = 1
	SIGINT  Signal = 2
	SIGQUIT Signal = 3
	SIGKILL Signal = 9
	SIGUSR1 Signal = 10
	SIGUSR2 Signal = 12
	SIGTERM Signal = 15
)

var signalNames = map[Signal]string{SIGHUP: "HUP", SIGINT: "INT", SIGQUIT: "QUIT", SIGKILL: "KILL", SIGUSR1: "USR1", SIGUSR2: "USR2", SIGTERM: "TERM"}

// String names the signal as kill -l does (TERM), or gives its number.
func (s Signal) String() string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return strconv.Itoa(int(s))
}

// MaxSignal is the highest signal number Linux has.
const MaxSignal = 64

// ParseSignal reads a signal by name (TERM, INT, KILL, HUP, QUIT, USR1, USR2, with or without
// SIG, any case) or by number (1-64).
func ParseSignal(s string) (Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	for sig, n := range signalNames {
		if n == name {
			return sig, nil
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 1 && n <= MaxSignal {
		return Signal(n), nil
	}
	return 0, &InvalidArgumentError{Reason: fmt.Sprintf("signal %q is not TERM, INT, KILL, HUP, QUIT, USR1, USR2 or a number from 1 to %d", s, MaxSignal)}
}

// ProcessRef names one process wherever its output is kept: the sandbox's key and kind, the
// instance it runs in, and its ID.
type ProcessRef struct {
	Key      Key
	Kind     string
	Instance string
	ID       string
}
