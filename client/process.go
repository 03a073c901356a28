package client

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The processes of a remote sandbox (docs/nats-api.md, "Processes"): [Sandbox] is a
// [sandbox.ProcessRunner].

var _ sandbox.ProcessRunner = (*Sandbox)(nil)

// processWaitBound is how long a process_wait call may wait when its ctx sets no deadline.
const processWaitBound = 24 * time.Hour

// StartProcess starts spec in the sandbox. A spec without an ID gets one here, so the start
// is safe to repeat after a connection drop: the engine answers a repeat with the process the
// first attempt started.
func (s *Sandbox) StartProcess(ctx context.Context, spec sandbox.ProcessSpec) (sandbox.Process, error) {
	if spec.ID == "" {
		spec.ID = newProcessID()
	}
	if err := spec.Validate(); err != nil {
		return sandbox.Process{}, err
	}
	req := &messages.APIProcessStartRequest{APIEnvelope: s.envelope(messages.APIProcessStartRequestType), Process: messages.ProcessSpecToWire(spec)}
	var resp messages.APIProcessStartResponse
	c := s.call(messages.SubjectProcessStartT, &req.APIEnvelope, req, &resp, messages.APIProcessStartResponseType, 0)
	c.repeatable = true // by its ID
	if err := s.b.do(ctx, c); err != nil {
		return sandbox.Process{}, err
	}
	if resp.Process == nil {
		return sandbox.Process{}, &sandbox.ProtocolError{Backend: "engine", Reason: "a process start answered no process"}
	}
	return messages.ProcessFromWire(*resp.Process), nil
}

func newProcessID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "p-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// ListProcesses lists the sandbox's processes.
func (s *Sandbox) ListProcesses(ctx context.Context) ([]sandbox.Process, error) {
	req := &messages.APIProcessListRequest{APIEnvelope: s.envelope(messages.APIProcessListRequestType)}
	var resp messages.APIProcessListResponse
	if err := s.b.do(ctx, s.call(messages.SubjectProcessListT, &req.APIEnvelope, req, &resp, messages.APIProcessListResponseType, 0)); err != nil {
		return nil, err
	}
	out := make([]sandbox.Process, 0, len(resp.Processes))
	for _, p := range resp.Processes {
		out = append(out, messages.ProcessFromWire(p))
	}
	return out, nil
}

// ReadProcessOutput reads id's output from sequence from: at most opts.MaxBytes (the engine
// returns at most messages.MaxProcessReadBytes a call), waiting up to opts.Wait for output.
func (s *Sandbox) ReadProcessOutput(ctx context.Context, id string, from int64, opts sandbox.ReadOptions) (sandbox.ProcessOutput, error) {
	req := &messages.APIProcessReadRequest{APIEnvelope: s.envelope(messages.APIProcessReadRequestType), ID: id, Seq: from,
		MaxBytes: opts.MaxBytes, FollowMS: opts.Wait.Milliseconds()}
	var resp messages.APIProcessReadResponse
	if err := s.b.do(ctx, s.call(messages.SubjectProcessReadT, &req.APIEnvelope, req, &resp, messages.APIProcessReadResponseType, opts.Wait)); err != nil {
		return sandbox.ProcessOutput{}, err
	}
	return messages.ProcessOutputFromWire(&resp), nil
}

// WriteProcessStdin writes p to id's standard input. It is never repeated after a drop (the
// bytes may have gone in): it then answers [*OutcomeUnknownError].
func (s *Sandbox) WriteProcessStdin(ctx context.Context, id string, p []byte) error {
	req := &messages.APIProcessStdinRequest{APIEnvelope: s.envelope(messages.APIProcessStdinRequestType), ID: id, Data: p}
	var resp messages.APIProcessStdinResponse
	return s.b.do(ctx, s.call(messages.SubjectProcessStdinT, &req.APIEnvelope, req, &resp, messages.APIProcessStdinResponseType, 0))
}

// CloseProcessStdin closes id's standard input.
func (s *Sandbox) CloseProcessStdin(ctx context.Context, id string) error {
	req := &messages.APIProcessCloseStdinRequest{APIEnvelope: s.envelope(messages.APIProcessCloseStdinRequestType), ID: id}
	var resp messages.APIProcessCloseStdinResponse
	return s.b.do(ctx, s.call(messages.SubjectProcessCloseStdinT, &req.APIEnvelope, req, &resp, messages.APIProcessCloseStdinResponseType, 0))
}

// ResizeProcess sets id's terminal size.
func (s *Sandbox) ResizeProcess(ctx context.Context, id string, size sandbox.TerminalSize) error {
	req := &messages.APIProcessResizeRequest{APIEnvelope: s.envelope(messages.APIProcessResizeRequestType), ID: id, Rows: size.Rows, Cols: size.Cols}
	var resp messages.APIProcessResizeResponse
	return s.b.do(ctx, s.call(messages.SubjectProcessResizeT, &req.APIEnvelope, req, &resp, messages.APIProcessResizeResponseType, 0))
}

// SignalProcess sends sig to id's process group. It is never repeated after a drop.
func (s *Sandbox) SignalProcess(ctx context.Context, id string, sig sandbox.Signal) error {
	req := &messages.APIProcessSignalRequest{APIEnvelope: s.envelope(messages.APIProcessSignalRequestType), ID: id, Signal: sig.String()}
	var resp messages.APIProcessSignalResponse
	return s.b.do(ctx, s.call(messages.SubjectProcessSignalT, &req.APIEnvelope, req, &resp, messages.APIProcessSignalResponseType, 0))
}

// WaitProcess waits until id has ended and its output is complete, for at most ctx (without
// a deadline, 24 hours).
func (s *Sandbox) WaitProcess(ctx context.Context, id string) (sandbox.Process, error) {
	req := &messages.APIProcessWaitRequest{APIEnvelope: s.envelope(messages.APIProcessWaitRequestType), ID: id}
	var resp messages.APIProcessWaitResponse
	if err := s.b.do(ctx, s.call(messages.SubjectProcessWaitT, &req.APIEnvelope, req, &resp, messages.APIProcessWaitResponseType, processWaitBound)); err != nil {
		return sandbox.Process{}, err
	}
	if resp.Process == nil {
		return sandbox.Process{}, &sandbox.ProtocolError{Backend: "engine", Reason: "a process wait answered no process"}
	}
	return messages.ProcessFromWire(*resp.Process), nil
}

// FollowProcess reads id's output from sequence from to its end, handing each chunk to
// onChunk and each cut to onCut (nil: cuts are only counted in the result), and returns the
// process's exit. Each read waits up to wait for more output. It resumes on its own across
// reads; a caller that stops (ctx) resumes later from the sequence after the last chunk it was
// handed.
func FollowProcess(ctx context.Context, pr sandbox.ProcessRunner, id string, from int64, wait time.Duration,
	onChunk func(sandbox.OutputChunk), onCut func(sandbox.OutputCut)) (*sandbox.ProcessExit, error) {
	for {
		out, err := pr.ReadProcessOutput(ctx, id, from, sandbox.ReadOptions{Wait: wait})
		if err != nil {
			return nil, err
		}
		if out.Cut != nil && onCut != nil {
			onCut(*out.Cut)
		}
		for _, c := range out.Chunks {
			onChunk(c)
		}
		from = out.Next
		if out.Exit != nil {
			return out.Exit, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
