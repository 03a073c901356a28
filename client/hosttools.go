package client

import (
	"context"
	"time"

	"github.com/mafsandbox/engine/messages"
)

// ProgramResult is a finished run_program: the exit code its marker claims (the guest's
// claim) and the program's combined output.
type ProgramResult struct {
	ExitCode int
	Output   []byte
	Note     string // why Output is missing, when it is
	Calls    int
	RunDir   string
}

// RunProgram asks the engine to run a host-tools program in this sandbox (run_program): the
// engine serves every tool call by a request to the subject req names for the tool, and
// enforces the registry req describes. The envelope is filled in here. A run past its bound
// fails with [*sandbox.ProgramTimeoutError].
func (s *Sandbox) RunProgram(ctx context.Context, req messages.APIRunProgramRequest) (ProgramResult, error) {
	req.APIEnvelope = s.envelope(messages.APIRunProgramRequestType)
	var resp messages.APIRunProgramResponse
	// The engine's own graces: final look, signal, and host_tools/ and run reclaim.
	extra := time.Duration(req.TimeoutMS)*time.Millisecond + time.Minute
	if err := s.b.do(ctx, s.call(messages.SubjectRunProgramT, &req.APIEnvelope, &req, &resp, messages.APIRunProgramResponseType, extra)); err != nil {
		return ProgramResult{}, err
	}
	out, err := s.fetch(ctx, "output", resp.Output)
	if err != nil {
		return ProgramResult{}, err
	}
	return ProgramResult{ExitCode: resp.ExitCode, Output: out, Note: resp.Note, Calls: resp.Calls, RunDir: resp.RunDir}, nil
}
