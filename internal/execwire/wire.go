// Package execwire is the exec channel's protocol (docs/architecture.md, "The exec channel"):
// the frames the engine and the sandbox's supervisor (cmd/execd) exchange over the unix
// socket the supervisor listens on inside the container. It uses the standard library only,
// so the static supervisor can import it.
//
// A frame is one type byte, a big-endian uint32 payload length and the payload. The
// supervisor speaks first (Hello, payload [Version]); the engine then sends one Run; the
// supervisor answers Started or NotStarted, then Stdout and Stderr frames as the program
// writes, then Exit: once the program has ended and both output pipes have closed, or
// [PipeGrace] after its end when a process it left running holds them open. The engine may
// send Kill at any time after Run: that alone kills the command's process group. Closing the
// connection does not: a caller that stops waiting leaves the command running, as a docker
// exec client that goes away does.
//
// A connection may instead carry the supervisor's processes (process.go): after the Hello the
// engine sends Calls, each answered by one Reply (start, list, stdin, close_stdin, resize,
// signal, wait, end_all), or one Attach, after which the supervisor streams a process's output
// as Chunk frames from the sequence asked, a Gap where its buffer no longer holds what was
// asked, Caught each time it has sent everything written so far, and End once the process has
// ended and all of its output was sent; the engine may send Release on that connection to let
// the supervisor drop what it has stored.
package execwire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Version is the protocol's name and revision, sent in the supervisor's Hello. The engine
// also looks for it in the supervisor binary before it copies it into a sandbox, so the two
// change together. Revision 2 stopped killing on a closed connection; revision 3 answers a
// command whose background child holds its output after [PipeGrace]; revision 4 adds the
// processes the supervisor owns (Call, Attach).
const Version = "maf-sandbox-exec/4"

// PipeGrace is how long the supervisor waits, after a command's own process has ended, for
// its output pipes to close. A process it left running (a server started with `&`) may hold
// them open for as long as it runs; once the grace is spent the supervisor sends what the
// command wrote before it ended, then Exit, and discards whatever comes after, leaving that
// process running. docker exec answers alike after its daemon's 2 s; a command that leaves
// nothing behind never waits for it.
const PipeGrace = 500 * time.Millisecond

// Paths inside the sandbox: the supervisor binary (the container's entrypoint), and its socket
// in a directory the supervisor creates with mode 0700.
const (
	Binary    = "/maf-sandbox-execd"
	SocketDir = "/.maf-sandbox-exec"
	Socket    = SocketDir + "/sock"
)

// Frame types.
const (
	Hello      byte = 'H' // supervisor → engine: Version
	Run        byte = 'R' // engine → supervisor: a [Request], JSON
	Started    byte = 'S' // supervisor → engine: the process runs (payload: its pid, decimal)
	NotStarted byte = 'N' // supervisor → engine: a [StartFailure], JSON; nothing ran
	Stdout     byte = 'O' // supervisor → engine: output bytes
	Stderr     byte = 'E' // supervisor → engine: output bytes
	Exit       byte = 'X' // supervisor → engine: the exit code, decimal (128+signal when killed)
	Kill       byte = 'K' // engine → supervisor: SIGKILL the command's process group

	// The processes the supervisor owns (process.go).
	Call    byte = 'C' // engine → supervisor: a [Call], JSON
	Reply   byte = 'Y' // supervisor → engine: a [Reply], JSON
	Attach  byte = 'A' // engine → supervisor: an [AttachRequest], JSON
	Chunk   byte = 'D' // supervisor → engine: one chunk of output ([EncodeChunk])
	Gap     byte = 'G' // supervisor → engine: output no longer held, 16 bytes: from and to
	Caught  byte = 'P' // supervisor → engine: everything written so far was sent, 8 bytes: the end
	End     byte = 'Z' // supervisor → engine: the process ended and all its output was sent: a [Process], JSON
	Release byte = 'L' // engine → supervisor: 8 bytes, a sequence: the output before it is stored
)

// MaxPayload bounds one frame's payload: a Run carries the argv (the kernel's own limit on
// arguments is about this size), output comes in far smaller chunks.
const MaxPayload = 4 << 20

// Request is a Run's payload: the program and its arguments (argv[0] resolved in the
// sandbox's PATH as docker exec resolves it) and the working directory.
type Request struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
}

// StartFailure is a NotStarted's payload: why the process could not start (Cause is one of
// the sandbox.StartFailure values: work_dir, program, not_executable, runtime).
type StartFailure struct {
	Cause   string `json:"cause"`
	Message string `json:"message"`
}

// ErrFrameTooLarge is a frame whose announced payload is over [MaxPayload].
var ErrFrameTooLarge = errors.New("execwire: frame payload over the limit")

// RequestTooLargeError is a [Request] whose Run payload would be over [MaxPayload]: no frame
// can carry it. It matches [ErrFrameTooLarge].
type RequestTooLargeError struct{ Size int }

func (e *RequestTooLargeError) Error() string {
	return fmt.Sprintf("execwire: the request is %d bytes encoded, over the limit of %d", e.Size, MaxPayload)
}

// Is reports ErrFrameTooLarge.
func (e *RequestTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// EncodeRun is a Run frame's payload for req, or a [*RequestTooLargeError].
func EncodeRun(req Request) ([]byte, error) {
	p, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("execwire: encode the request: %w", err)
	}
	if len(p) > MaxPayload {
		return nil, &RequestTooLargeError{Size: len(p)}
	}
	return p, nil
}

// Write sends one frame.
func Write(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxPayload {
		return ErrFrameTooLarge
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// Read reads one frame whose payload is at most limit bytes (and never over [MaxPayload]).
func Read(r io.Reader, limit int) (typ byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:5])
	if n > uint32(min(limit, MaxPayload)) {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], payload, nil
}
