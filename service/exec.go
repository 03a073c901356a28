package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Output stream names of an [messages.APIExecChunk].
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

func exec(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIExecRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	var st *streamer
	execID := nuid.Next()
	if req.StreamTo != "" {
		if err := s.checkStreamSubject(req.StreamTo); err != nil {
			return nil, err
		}
		st = newStreamer(ctx, s, req.StreamTo, execID)
	}
	s.callLog(ctx).Debug("exec", zap.String("exec_id", execID))
	cmd := sandbox.Command{Argv: req.Argv, Shell: req.Shell}
	timeout := millis(req.TimeoutMS)
	var res sandbox.ExecResult
	switch live, ok := h.sandbox().(sandbox.StreamingExec); {
	case st != nil && ok:
		st.live = true
		res, err = live.ExecStreaming(ctx, cmd, req.WorkDir, timeout, req.MaxOutputBytes, st.emit)
	case req.MaxOutputBytes != 0:
		bounded, ok := h.sandbox().(sandbox.BoundedExec)
		if !ok {
			return nil, &sandbox.UnsupportedError{Backend: backendName(s), Op: "exec with max_output_bytes",
				Reason: "the sandbox cannot cap a command's output before buffering it"}
		}
		res, err = bounded.ExecBounded(ctx, cmd, req.WorkDir, timeout, req.MaxOutputBytes)
	default:
		res, err = h.sandbox().Exec(ctx, cmd, req.WorkDir, timeout)
	}
	if err != nil {
		return nil, err
	}
	return s.execResponse(ctx, h, res, st, execID)
}

func runCode(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIRunCodeRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	res, err := h.sandbox().RunCode(ctx, req.Code, millis(req.TimeoutMS))
	if err != nil {
		return nil, err
	}
	r, err := s.execResult(ctx, h, res, nil, nuid.Next())
	if err != nil {
		return nil, err
	}
	return &messages.APIRunCodeResponse{APIExecResult: r}, nil
}

func (s *Service) execResponse(ctx context.Context, h *handle, res sandbox.ExecResult, st *streamer, execID string) (any, error) {
	if st != nil && !st.live {
		st.emit(StreamStdout, res.StdoutBytes)
		st.emit(StreamStderr, res.StderrBytes)
	}
	r, err := s.execResult(ctx, h, res, st, execID)
	if err != nil {
		return nil, err
	}
	return &messages.APIExecResponse{APIExecResult: r}, nil
}

func (s *Service) execResult(ctx context.Context, h *handle, res sandbox.ExecResult, st *streamer, execID string) (messages.APIExecResult, error) {
	stdout, err := s.transfers.blob(h.id, res.StdoutBytes)
	if err != nil {
		return messages.APIExecResult{}, err
	}
	stderr, err := s.transfers.blob(h.id, res.StderrBytes)
	if err != nil {
		return messages.APIExecResult{}, err
	}
	r := messages.APIExecResult{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr, ProducerOwnsStderr: res.ProducerOwnsStderr,
		NotStarted: string(res.NotStarted), ExecID: execID}
	if st != nil {
		r.Chunks = st.count()
		if err := s.nc.Flush(); err != nil {
			s.callLog(ctx).Debug("flush exec chunks", zap.Error(err))
		}
	}
	return r, nil
}

// checkStreamSubject refuses a stream_to the engine must not publish on (see
// checkOutboundSubject).
func (s *Service) checkStreamSubject(subject string) error {
	return s.checkOutboundSubject("stream_to", subject)
}

// checkOutboundSubject refuses a subject a caller names for the engine to publish or send
// on: empty, wildcards or white space, empty tokens, system subjects ($…) and the API's own.
// what names the field in the refusal.
func (s *Service) checkOutboundSubject(what, subject string) error {
	bad := func(why string) error {
		return &messages.BadRequestError{Reason: fmt.Sprintf("%s %q is refused: %s", what, subject, why)}
	}
	switch {
	case subject == "":
		return bad("it is empty")
	case strings.ContainsAny(subject, " \t\r\n*>"):
		return bad("it holds a wildcard or white space")
	case strings.HasPrefix(subject, "$"):
		return bad("it is a system subject")
	case subject == s.o.prefix || strings.HasPrefix(subject, s.o.prefix+"."):
		return bad("it is under the API's prefix")
	}
	for tok := range strings.SplitSeq(subject, ".") {
		if tok == "" {
			return bad("it has an empty token")
		}
	}
	return nil
}

// streamer publishes a command's output as chunks on the stream_to subject, in order, each
// with the exec's ID and the call's request ID (and its correlation headers).
type streamer struct {
	s         *Service
	subject   string
	execID    string
	requestID string
	header    nats.Header
	log       *zap.Logger
	live      bool // the sandbox emits while the command runs

	mu  sync.Mutex
	seq int
}

func newStreamer(ctx context.Context, s *Service, subject, execID string) *streamer {
	st := &streamer{s: s, subject: subject, execID: execID, log: s.callLog(ctx).With(zap.String("exec_id", execID))}
	if c := callOf(ctx); c != nil {
		st.requestID, st.header = c.requestID, c.headers()
	}
	return st
}

func (st *streamer) emit(stream string, p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	size := st.s.o.chunkSize
	for len(p) > 0 {
		n := min(len(p), size)
		b, err := json.Marshal(messages.APIExecChunk{Type: messages.APIExecChunkType, Seq: st.seq, Stream: stream, Data: p[:n],
			ExecID: st.execID, RequestID: st.requestID})
		if err == nil {
			err = st.s.nc.PublishMsg(&nats.Msg{Subject: st.subject, Data: b, Header: st.header})
		}
		if err != nil {
			st.log.Debug("publish exec chunk", zap.String("stream_to", st.subject), zap.Error(err))
		}
		st.seq++
		p = p[n:]
	}
}

func (st *streamer) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.seq
}

// callLog is the logger of the call ctx belongs to, or the engine's.
func (s *Service) callLog(ctx context.Context) *zap.Logger {
	if c := callOf(ctx); c != nil {
		return c.log
	}
	return s.log
}

func backendName(s *Service) string {
	if b := s.router.Backend(); b != nil {
		return b.Name()
	}
	return "engine"
}
