package execwire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The operations of a [CallRequest].
const (
	OpStart      = "start"       // Start: start a process, or return the one already under its ID
	OpList       = "list"        // every process the supervisor holds, running or ended
	OpStdin      = "stdin"       // ID, Data: write to the process's standard input
	OpCloseStdin = "close_stdin" // ID: close it (on a terminal: send the end-of-file character)
	OpResize     = "resize"      // ID, Size: a terminal's new size
	OpSignal     = "signal"      // ID, Signal: signal the process's group
	OpWait       = "wait"        // ID: answered once the process has ended and its output is complete
	OpEndAll     = "end_all"     // Reason: kill every running process; answered once all have ended
)

// Reasons a process ended, as the supervisor records them.
const (
	ReasonExited    = "exited"             // it exited by itself; Code is its status
	ReasonSignalled = "signalled"          // a signal ended it; Signal names it
	ReasonTimedOut  = "timed_out"          // the supervisor killed it at its timeout
	ReasonOOMKilled = "oom_killed"         // the kernel killed it for memory (the cgroup's oom_kill counter rose)
	ReasonDisposed  = "killed_at_disposal" // the supervisor killed it because its sandbox is being disposed
	ReasonLost      = "lost"               // its end is not known (not recorded by the supervisor itself)
)

// CallRequest is one request on a process connection.
type CallRequest struct {
	Op     string        `json:"op"`
	ID     string        `json:"id,omitempty"`
	Start  *StartRequest `json:"start,omitempty"`
	Data   []byte        `json:"data,omitempty"`
	Size   *Size         `json:"size,omitempty"`
	Signal int           `json:"signal,omitempty"`
	Reason string        `json:"reason,omitempty"`
}

// Size is a terminal's size in characters.
type Size struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// StartRequest is what a start runs. Argv[0] is resolved as a Run's is; Env is added to the
// supervisor's own environment (a variable named twice takes the later value); Dir is the
// working directory. With TTY the process gets a terminal of that size as its standard input,
// output and error and its controlling terminal; without it, two pipes for its output and, with
// Stdin, a pipe for its input (/dev/null otherwise). TimeoutMS > 0 kills its group after that
// long. Buffer is how many bytes of its output the supervisor holds before it drops the
// oldest; MaxProcesses bounds the processes running at once.
type StartRequest struct {
	ID           string   `json:"id"`
	Argv         []string `json:"argv"`
	Dir          string   `json:"dir"`
	Env          []string `json:"env,omitempty"`
	TTY          *Size    `json:"tty,omitempty"`
	Stdin        bool     `json:"stdin,omitempty"`
	TimeoutMS    int64    `json:"timeout_ms,omitempty"`
	Buffer       int64    `json:"buffer,omitempty"`
	MaxProcesses int      `json:"max_processes,omitempty"`
	// Retention is the engine's, kept with the process and listed back (the supervisor does
	// not read it): how long and how much of its output the engine's store keeps.
	Retention *Retention `json:"retention,omitempty"`
	// HoldMS > 0 says an engine is about to follow the output into its store: until one
	// attaches and releases (or HoldMS passes) the process's output past its Buffer waits for
	// room, as it does while a follower is attached, rather than dropping the oldest.
	HoldMS int64 `json:"hold_ms,omitempty"`
}

// Retention is a process's output retention as the engine asked it: bytes and milliseconds.
type Retention struct {
	Bytes int64 `json:"bytes,omitempty"`
	AgeMS int64 `json:"age_ms,omitempty"`
}

// Process is what the supervisor knows of one process.
type Process struct {
	ID        string       `json:"id"`
	PID       int          `json:"pid"`
	Argv      []string     `json:"argv"`
	Dir       string       `json:"dir"`
	TTY       *Size        `json:"tty,omitempty"`
	Stdin     bool         `json:"stdin"` // its input is open for writes
	StartedAt int64        `json:"started_at"`
	TimeoutMS int64        `json:"timeout_ms,omitempty"`
	Retention *Retention   `json:"retention,omitempty"`
	Exit      *ProcessExit `json:"exit,omitempty"`    // nil while it runs
	First     int64        `json:"first"`             // the first sequence of output still held
	End       int64        `json:"end"`               // the sequence after the last byte it wrote
	Digest    string       `json:"digest"`            // of the StartRequest, without the ID
	Created   bool         `json:"created,omitempty"` // in a start's reply: this start made it
}

// ProcessExit is how a process ended: the reason, its exit status (ReasonExited) or the signal that
// ended it, and when (Unix milliseconds).
type ProcessExit struct {
	Reason string `json:"reason"`
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	At     int64  `json:"at"`
}

// CallReply answers one [CallRequest]: Error, or what the operation returns.
type CallReply struct {
	Error     *CallError `json:"error,omitempty"`
	Process   *Process   `json:"process,omitempty"`
	Processes []Process  `json:"processes,omitempty"`
	Written   int        `json:"written,omitempty"`
}

// Codes of a [CallError].
const (
	CodeNotFound    = "not_found"    // no process under the ID
	CodeExists      = "exists"       // a start under an ID that holds another command
	CodeLimit       = "limit"        // MaxProcesses are running
	CodeEnded       = "ended"        // the process has ended
	CodeStdinClosed = "stdin_closed" // its input is closed, or was never open
	CodeNotTTY      = "not_tty"      // a resize of a process without a terminal
	CodeNotStarted  = "not_started"  // the program could not be started (Cause says why)
	CodeStdinFull   = "stdin_full"   // the process did not read its input in time; Written says how much went
	CodeInvalid     = "invalid"      // a malformed call
)

// CallError is a refused [CallRequest]. Cause is set with [CodeNotStarted]: one of the
// sandbox.StartFailure values.
type CallError struct {
	Code    string `json:"code"`
	Cause   string `json:"cause,omitempty"`
	Message string `json:"message"`
}

func (e *CallError) Error() string { return "execwire: " + e.Code + ": " + e.Message }

// AttachRequest asks for a process's output from sequence From on.
type AttachRequest struct {
	ID   string `json:"id"`
	From int64  `json:"from"`
}

// MaxChunk is the most output one Chunk frame carries.
const MaxChunk = 32 << 10

// EncodeChunk is a Chunk frame's payload: the stream, the sequence, the bytes.
func EncodeChunk(stream byte, seq int64, data []byte) []byte {
	p := make([]byte, 9+len(data))
	p[0] = stream
	binary.BigEndian.PutUint64(p[1:9], uint64(seq))
	copy(p[9:], data)
	return p
}

// ErrMalformed is a frame whose payload is not what its type carries.
var ErrMalformed = errors.New("execwire: malformed frame")

// DecodeChunk reads a Chunk frame's payload; data aliases p.
func DecodeChunk(p []byte) (stream byte, seq int64, data []byte, err error) {
	if len(p) < 9 {
		return 0, 0, nil, fmt.Errorf("%w: a chunk of %d bytes", ErrMalformed, len(p))
	}
	return p[0], int64(binary.BigEndian.Uint64(p[1:9])), p[9:], nil
}

// EncodeSeqs is the payload of a Gap (two sequences), Caught or Release (one).
func EncodeSeqs(seqs ...int64) []byte {
	p := make([]byte, 8*len(seqs))
	for i, s := range seqs {
		binary.BigEndian.PutUint64(p[8*i:], uint64(s))
	}
	return p
}

// DecodeSeqs reads n sequences from a Gap, Caught or Release payload.
func DecodeSeqs(p []byte, n int) ([]int64, error) {
	if len(p) != 8*n {
		return nil, fmt.Errorf("%w: %d bytes for %d sequences", ErrMalformed, len(p), n)
	}
	seqs := make([]int64, n)
	for i := range seqs {
		seqs[i] = int64(binary.BigEndian.Uint64(p[8*i:]))
	}
	return seqs, nil
}
