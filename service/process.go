package service

import (
	"context"
	"fmt"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The process calls (docs/nats-api.md, "Processes"): each addresses a process of a sandbox
// the engine holds, by the handle and the process's ID, through the sandbox's
// [sandbox.ProcessRunner].

// processesOf is the handle's sandbox as a process runner, or the refusal of one that is not.
func (s *Service) processesOf(env *messages.APIEnvelope) (sandbox.ProcessRunner, error) {
	h, err := s.sandboxFor(env)
	if err != nil {
		return nil, err
	}
	pr, ok := h.sandbox().(sandbox.ProcessRunner)
	if !ok {
		return nil, &sandbox.UnsupportedError{Backend: fmt.Sprintf("%T", h.sandbox()), Op: "processes", Reason: "the sandbox runs no processes across calls"}
	}
	return pr, nil
}

func processStart(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessStartRequest](data)
	if err != nil {
		return nil, err
	}
	spec, err := messages.ProcessSpecFromWire(req.Process)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	p, err := pr.StartProcess(ctx, spec)
	if err != nil {
		return nil, err
	}
	w := messages.ProcessToWire(p)
	return &messages.APIProcessStartResponse{Process: &w}, nil
}

func processList(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessListRequest](data)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	ps, err := pr.ListProcesses(ctx)
	if err != nil {
		return nil, err
	}
	out := &messages.APIProcessListResponse{}
	for _, p := range ps {
		out.Processes = append(out.Processes, messages.ProcessToWire(p))
	}
	return out, nil
}

func processRead(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessReadRequest](data)
	if err != nil {
		return nil, err
	}
	if req.Seq < 0 || req.MaxBytes < 0 || req.FollowMS < 0 {
		return nil, &messages.BadRequestError{Reason: "seq, max_bytes and follow_ms are never negative"}
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	maxBytes := req.MaxBytes
	if maxBytes == 0 || maxBytes > messages.MaxProcessReadBytes {
		maxBytes = messages.MaxProcessReadBytes
	}
	out, err := pr.ReadProcessOutput(ctx, req.ID, req.Seq, sandbox.ReadOptions{MaxBytes: maxBytes, Wait: millis(req.FollowMS)})
	if err != nil {
		return nil, err
	}
	return messages.ProcessOutputToWire(out), nil
}

func processStdin(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessStdinRequest](data)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := pr.WriteProcessStdin(ctx, req.ID, req.Data); err != nil {
		return nil, err
	}
	return &messages.APIProcessStdinResponse{}, nil
}

func processCloseStdin(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessCloseStdinRequest](data)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := pr.CloseProcessStdin(ctx, req.ID); err != nil {
		return nil, err
	}
	return &messages.APIProcessCloseStdinResponse{}, nil
}

func processResize(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessResizeRequest](data)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := pr.ResizeProcess(ctx, req.ID, sandbox.TerminalSize{Rows: req.Rows, Cols: req.Cols}); err != nil {
		return nil, err
	}
	return &messages.APIProcessResizeResponse{}, nil
}

func processSignal(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessSignalRequest](data)
	if err != nil {
		return nil, err
	}
	sig, err := sandbox.ParseSignal(req.Signal)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if err := pr.SignalProcess(ctx, req.ID, sig); err != nil {
		return nil, err
	}
	return &messages.APIProcessSignalResponse{}, nil
}

func processWait(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIProcessWaitRequest](data)
	if err != nil {
		return nil, err
	}
	pr, err := s.processesOf(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	p, err := pr.WaitProcess(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	w := messages.ProcessToWire(p)
	return &messages.APIProcessWaitResponse{Process: &w}, nil
}
