package messages

import (
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// The processes of a sandbox (docs/nats-api.md, "Processes"): each call names the sandbox
// (the envelope) and, but for a start and a list, the process by its ID.

// Type values of the process messages.
const (
	APIProcessStartRequestType       = APITypePrefix + "process_start_request"
	APIProcessStartResponseType      = APITypePrefix + "process_start_response"
	APIProcessListRequestType        = APITypePrefix + "process_list_request"
	APIProcessListResponseType       = APITypePrefix + "process_list_response"
	APIProcessReadRequestType        = APITypePrefix + "process_read_request"
	APIProcessReadResponseType       = APITypePrefix + "process_read_response"
	APIProcessStdinRequestType       = APITypePrefix + "process_stdin_request"
	APIProcessStdinResponseType      = APITypePrefix + "process_stdin_response"
	APIProcessCloseStdinRequestType  = APITypePrefix + "process_close_stdin_request"
	APIProcessCloseStdinResponseType = APITypePrefix + "process_close_stdin_response"
	APIProcessResizeRequestType      = APITypePrefix + "process_resize_request"
	APIProcessResizeResponseType     = APITypePrefix + "process_resize_response"
	APIProcessSignalRequestType      = APITypePrefix + "process_signal_request"
	APIProcessSignalResponseType     = APITypePrefix + "process_signal_response"
	APIProcessWaitRequestType        = APITypePrefix + "process_wait_request"
	APIProcessWaitResponseType       = APITypePrefix + "process_wait_response"
)

// MaxProcessReadBytes is the most one process_read returns: its chunks, base64 in JSON, fit
// a NATS message of the default 1 MiB max payload.
const MaxProcessReadBytes = 512 << 10

// APIProcessSpec is what a start runs: exactly one of argv and shell, as an exec's.
type APIProcessSpec struct {
	ID        string        `json:"id,omitempty"`
	Argv      []string      `json:"argv,omitempty"`
	Shell     string        `json:"shell,omitempty"`
	Env       []string      `json:"env,omitempty"`
	WorkDir   string        `json:"work_dir,omitempty"`
	User      string        `json:"user,omitempty"`
	Terminal  *APITerminal  `json:"terminal,omitempty"`
	Stdin     bool          `json:"stdin,omitempty"`
	TimeoutMS int64         `json:"timeout_ms,omitempty"`
	Retention *APIRetention `json:"retention,omitempty"`
}

// APITerminal is a terminal's size in characters.
type APITerminal struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// APIRetention is a process's output retention: the last bytes, for at most age_ms.
type APIRetention struct {
	Bytes int64 `json:"bytes,omitempty"`
	AgeMS int64 `json:"age_ms,omitempty"`
}

// APIProcess is what the engine knows of one process.
type APIProcess struct {
	ID        string          `json:"id"`
	PID       int             `json:"pid,omitempty"`
	Argv      []string        `json:"argv,omitempty"`
	WorkDir   string          `json:"work_dir,omitempty"`
	Terminal  *APITerminal    `json:"terminal,omitempty"`
	Stdin     bool            `json:"stdin"`
	State     string          `json:"state"`
	StartedAt *time.Time      `json:"started_at,omitempty"`
	Exit      *APIProcessExit `json:"exit,omitempty"`
	Output    int64           `json:"output"`
	Transport string          `json:"transport"`
	Durable   bool            `json:"durable"`
	Created   bool            `json:"created,omitempty"`
	Retention *APIRetention   `json:"retention,omitempty"`
}

// APIProcessExit is how a process ended.
type APIProcessExit struct {
	Reason   string     `json:"reason"`
	ExitCode int        `json:"exit_code"`
	Signal   int        `json:"signal,omitempty"`
	At       *time.Time `json:"at,omitempty"`
}

// APIProcessStartRequest starts a process.
type APIProcessStartRequest struct {
	APIEnvelope
	Process APIProcessSpec `json:"process"`
}

// APIProcessStartResponse is the process started (or, for a repeated ID, the one it names).
type APIProcessStartResponse struct {
	APIResponse
	Process *APIProcess `json:"process,omitempty"`
}

// APIProcessListRequest lists the sandbox's processes.
type APIProcessListRequest struct {
	APIEnvelope
}

// APIProcessListResponse is every process, in start order.
type APIProcessListResponse struct {
	APIResponse
	Processes []APIProcess `json:"processes,omitempty"`
}

// APIProcessReadRequest reads a process's output from seq: at most max_bytes (default and
// most [MaxProcessReadBytes]), waiting up to follow_ms when none is there yet.
type APIProcessReadRequest struct {
	APIEnvelope
	ID       string `json:"id"`
	Seq      int64  `json:"seq"`
	MaxBytes int64  `json:"max_bytes,omitempty"`
	FollowMS int64  `json:"follow_ms,omitempty"`
}

// APIProcessReadResponse is one read: a cut first when seq is no longer held, then the
// chunks; next is where to read next, exit is set once the output is complete.
type APIProcessReadResponse struct {
	APIResponse
	Cut    *APIOutputCut    `json:"cut,omitempty"`
	Chunks []APIOutputChunk `json:"chunks,omitempty"`
	Next   int64            `json:"next"`
	Exit   *APIProcessExit  `json:"exit,omitempty"`
}

// APIOutputChunk is one piece of a process's output: its sequence, stream and bytes.
type APIOutputChunk struct {
	Seq    int64  `json:"seq"`
	Stream string `json:"stream"`
	Data   []byte `json:"data"`
}

// APIOutputCut is output no longer held: [from, to).
type APIOutputCut struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason"`
}

// APIProcessStdinRequest writes data to a process's standard input.
type APIProcessStdinRequest struct {
	APIEnvelope
	ID   string `json:"id"`
	Data []byte `json:"data"`
}

// APIProcessStdinResponse says the write went in.
type APIProcessStdinResponse struct {
	APIResponse
}

// APIProcessCloseStdinRequest closes a process's standard input.
type APIProcessCloseStdinRequest struct {
	APIEnvelope
	ID string `json:"id"`
}

// APIProcessCloseStdinResponse says it is closed.
type APIProcessCloseStdinResponse struct {
	APIResponse
}

// APIProcessResizeRequest sets a process's terminal size.
type APIProcessResizeRequest struct {
	APIEnvelope
	ID   string `json:"id"`
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// APIProcessResizeResponse says the terminal has its new size.
type APIProcessResizeResponse struct {
	APIResponse
}

// APIProcessSignalRequest sends a signal, by name (TERM, INT, KILL, HUP, QUIT, USR1, USR2)
// or number, to a process's group.
type APIProcessSignalRequest struct {
	APIEnvelope
	ID     string `json:"id"`
	Signal string `json:"signal"`
}

// APIProcessSignalResponse says the signal was sent.
type APIProcessSignalResponse struct {
	APIResponse
}

// APIProcessWaitRequest waits for a process's end.
type APIProcessWaitRequest struct {
	APIEnvelope
	ID string `json:"id"`
}

// APIProcessWaitResponse is the process once it has ended.
type APIProcessWaitResponse struct {
	APIResponse
	Process *APIProcess `json:"process,omitempty"`
}

// ProcessSpecFromWire is the spec w describes; a bad value is refused as
// [sandbox.ProcessSpec.Validate] refuses it.
func ProcessSpecFromWire(w APIProcessSpec) (sandbox.ProcessSpec, error) {
	spec := sandbox.ProcessSpec{ID: w.ID, Command: sandbox.Command{Argv: w.Argv, Shell: w.Shell}, Env: w.Env, WorkDir: w.WorkDir,
		User: w.User, Stdin: w.Stdin, Timeout: time.Duration(w.TimeoutMS) * time.Millisecond}
	if w.Terminal != nil {
		spec.Terminal = &sandbox.TerminalSize{Rows: w.Terminal.Rows, Cols: w.Terminal.Cols}
	}
	if w.Retention != nil {
		spec.Retention = &sandbox.OutputRetention{Bytes: w.Retention.Bytes, Age: time.Duration(w.Retention.AgeMS) * time.Millisecond}
	}
	return spec, spec.Validate()
}

// ProcessSpecToWire is spec on the wire.
func ProcessSpecToWire(spec sandbox.ProcessSpec) APIProcessSpec {
	w := APIProcessSpec{ID: spec.ID, Argv: spec.Command.Argv, Shell: spec.Command.Shell, Env: spec.Env, WorkDir: spec.WorkDir,
		User: spec.User, Stdin: spec.Stdin, TimeoutMS: spec.Timeout.Milliseconds()}
	if spec.Timeout > 0 && w.TimeoutMS == 0 {
		w.TimeoutMS = 1
	}
	if t := spec.Terminal; t != nil {
		w.Terminal = &APITerminal{Rows: t.Rows, Cols: t.Cols}
	}
	w.Retention = retentionToWire(spec.Retention)
	return w
}

func retentionToWire(r *sandbox.OutputRetention) *APIRetention {
	if r == nil {
		return nil
	}
	return &APIRetention{Bytes: r.Bytes, AgeMS: r.Age.Milliseconds()}
}

// ProcessToWire is p on the wire.
func ProcessToWire(p sandbox.Process) APIProcess {
	w := APIProcess{ID: p.ID, PID: p.PID, Argv: p.Argv, WorkDir: p.WorkDir, Stdin: p.Stdin, State: string(p.State),
		Exit: ExitToWire(p.Exit), Output: p.Output, Transport: string(p.Transport), Durable: p.Durable, Created: p.Created,
		Retention: retentionToWire(p.Retention)}
	if !p.StartedAt.IsZero() {
		t := p.StartedAt.UTC()
		w.StartedAt = &t
	}
	if t := p.Terminal; t != nil {
		w.Terminal = &APITerminal{Rows: t.Rows, Cols: t.Cols}
	}
	return w
}

// ProcessFromWire is the process w describes.
func ProcessFromWire(w APIProcess) sandbox.Process {
	p := sandbox.Process{ID: w.ID, PID: w.PID, Argv: w.Argv, WorkDir: w.WorkDir, Stdin: w.Stdin, State: sandbox.ProcessState(w.State),
		Exit: ExitFromWire(w.Exit), Output: w.Output, Transport: sandbox.ProcessTransport(w.Transport), Durable: w.Durable, Created: w.Created}
	if w.StartedAt != nil {
		p.StartedAt = *w.StartedAt
	}
	if t := w.Terminal; t != nil {
		p.Terminal = &sandbox.TerminalSize{Rows: t.Rows, Cols: t.Cols}
	}
	if r := w.Retention; r != nil {
		p.Retention = &sandbox.OutputRetention{Bytes: r.Bytes, Age: time.Duration(r.AgeMS) * time.Millisecond}
	}
	return p
}

// ExitToWire is e on the wire (nil stays nil).
func ExitToWire(e *sandbox.ProcessExit) *APIProcessExit {
	if e == nil {
		return nil
	}
	w := &APIProcessExit{Reason: string(e.Reason), ExitCode: e.ExitCode, Signal: int(e.Signal)}
	if !e.At.IsZero() {
		t := e.At.UTC()
		w.At = &t
	}
	return w
}

// ExitFromWire is the exit w describes (nil stays nil).
func ExitFromWire(w *APIProcessExit) *sandbox.ProcessExit {
	if w == nil {
		return nil
	}
	e := &sandbox.ProcessExit{Reason: sandbox.ExitReason(w.Reason), ExitCode: w.ExitCode, Signal: sandbox.Signal(w.Signal)}
	if w.At != nil {
		e.At = *w.At
	}
	return e
}

// ProcessOutputToWire is one read on the wire.
func ProcessOutputToWire(out sandbox.ProcessOutput) *APIProcessReadResponse {
	w := &APIProcessReadResponse{Next: out.Next, Exit: ExitToWire(out.Exit)}
	if c := out.Cut; c != nil {
		w.Cut = &APIOutputCut{From: c.From, To: c.To, Reason: c.Reason}
	}
	for _, c := range out.Chunks {
		w.Chunks = append(w.Chunks, APIOutputChunk{Seq: c.Seq, Stream: c.Stream, Data: c.Data})
	}
	return w
}

// ProcessOutputFromWire is the read w describes.
func ProcessOutputFromWire(w *APIProcessReadResponse) sandbox.ProcessOutput {
	out := sandbox.ProcessOutput{Next: w.Next, Exit: ExitFromWire(w.Exit)}
	if c := w.Cut; c != nil {
		out.Cut = &sandbox.OutputCut{From: c.From, To: c.To, Reason: c.Reason}
	}
	for _, c := range w.Chunks {
		out.Chunks = append(out.Chunks, sandbox.OutputChunk{Seq: c.Seq, Stream: c.Stream, Data: c.Data})
	}
	return out
}
