package service

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Output stream names of an [messages.APIExecChunk].
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// StreamingSandbox is [sandbox.StreamingExec]: a sandbox that hands over a command's output
// while it runs. For a sandbox without it the engine streams the output when the command has
// ended.
type StreamingSandbox = sandbox.StreamingExec

func exec(ctx context.Context, s *Service, data []byte) (any, error) {
	req, err := decode[messages.APIExecRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	var st *streamer
	if req.StreamTo != "" {
		if err := s.checkStreamSubject(req.StreamTo); err != nil {
			return nil, err
		}
		st = &streamer{s: s, subject: req.StreamTo}
	}
	cmd := sandbox.Command{Argv: req.Argv, Shell: req.Shell}
	timeout := millis(req.TimeoutMS)
	var res sandbox.ExecResult
	switch live, ok := h.sandbox().(StreamingSandbox); {
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
	return s.execResponse(h, res, st)
}

func runCode(ctx context.Context, s *Service, data []byte) (any, error) {
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
	r, err := s.execResult(h, res, nil)
	if err != nil {
		return nil, err
	}
	return &messages.APIRunCodeResponse{APIExecResult: r}, nil
}

func (s *Service) execResponse(h *handle, res sandbox.ExecResult, st *streamer) (any, error) {
	if st != nil && !st.live {
		st.emit(StreamStdout, res.StdoutBytes)
		st.emit(StreamStderr, res.StderrBytes)
	}
	r, err := s.execResult(h, res, st)
	if err != nil {
		return nil, err
	}
	return &messages.APIExecResponse{APIExecResult: r}, nil
}

func (s *Service) execResult(h *handle, res sandbox.ExecResult, st *streamer) (messages.APIExecResult, error) {
	stdout, err := s.transfers.blob(h.id, res.StdoutBytes)
	if err != nil {
		return messages.APIExecResult{}, err
	}
	stderr, err := s.transfers.blob(h.id, res.StderrBytes)
	if err != nil {
		return messages.APIExecResult{}, err
	}
	r := messages.APIExecResult{ExitCode: res.ExitCode, Stdout: stdout, Stderr: stderr, ProducerOwnsStderr: res.ProducerOwnsStderr}
	if st != nil {
		r.Chunks = st.count()
		if err := s.nc.Flush(); err != nil {
			s.log.Debug("flush exec chunks", zap.Error(err))
		}
	}
	return r, nil
}

// checkStreamSubject refuses a stream_to the engine must not publish on: wildcards, empty
// tokens, system subjects ($…) and the API's own subjects.
func (s *Service) checkStreamSubject(subject string) error {
	bad := func(why string) error {
		return &BadRequestError{Reason: fmt.Sprintf("stream_to %q is refused: %s", subject, why)}
	}
	switch {
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

// streamer publishes a command's output as chunks on the stream_to subject, in order.
type streamer struct {
	s       *Service
	subject string
	live    bool // the sandbox emits while the command runs

	mu  sync.Mutex
	seq int
}

func (st *streamer) emit(stream string, p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	size := st.s.o.chunkSize
	for len(p) > 0 {
		n := min(len(p), size)
		b, err := json.Marshal(messages.APIExecChunk{Type: messages.APIExecChunkType, Seq: st.seq, Stream: stream, Data: p[:n]})
		if err == nil {
			err = st.s.nc.Publish(st.subject, b)
		}
		if err != nil {
			st.s.log.Debug("publish exec chunk", zap.String("subject", st.subject), zap.Error(err))
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

func backendName(s *Service) string {
	if b := s.router.Backend(); b != nil {
		return b.Name()
	}
	return "engine"
}
