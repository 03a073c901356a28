package client

import (
	"context"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// ListSandboxes asks one engine (engine, or the pinned one when engine is "") for a page of
// the sandboxes it holds that req's filter matches; req's type is set here. Pass the reply's
// Next as req.After for the following page. It fails with an [*sandbox.InvalidArgumentError]
// when no engine is named, with the engine's error for a bad filter, and with an
// [*messages.EngineUnavailableError] when that engine does not answer.
func (b *Backend) ListSandboxes(ctx context.Context, engine string, req messages.APIListSandboxesRequest) (*messages.APIListSandboxesResponse, error) {
	if engine == "" {
		engine = b.o.engine
	}
	if engine == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "list sandboxes: name an engine (each engine lists what it holds)"}
	}
	req.Type = messages.APIListSandboxesRequestType
	var resp messages.APIListSandboxesResponse
	c := call{subject: messages.Engine(messages.SubjectEngineListSandboxesT, b.o.prefix, engine), env: &req.APIEnvelope, req: &req,
		resp: &resp, respType: messages.APIListSandboxesResponseType, pinned: true, engine: engine, repeatable: true}
	if err := b.do(ctx, c); err != nil {
		return nil, err
	}
	return &resp, nil
}

// ListProcessesOf asks engine for the processes of the sandbox req's envelope names (its key
// and the engine's handle): an operator's call, for a sandbox this client did not acquire;
// req's type is set here. It fails as [Backend.ListSandboxes], and with the engine's error
// for a handle it does not know or the caller may not use.
func (b *Backend) ListProcessesOf(ctx context.Context, engine string, req messages.APIProcessListRequest) (*messages.APIProcessListResponse, error) {
	req.Type = messages.APIProcessListRequestType
	var resp messages.APIProcessListResponse
	if err := b.operatorCall(ctx, engine, messages.SubjectProcessListT, &req.APIEnvelope, &req, &resp, messages.APIProcessListResponseType); err != nil {
		return nil, err
	}
	return &resp, nil
}

// ReadProcessOf reads a process's output from req.Seq on engine, as [Backend.ListProcessesOf]
// lists the processes.
func (b *Backend) ReadProcessOf(ctx context.Context, engine string, req messages.APIProcessReadRequest) (*messages.APIProcessReadResponse, error) {
	req.Type = messages.APIProcessReadRequestType
	var resp messages.APIProcessReadResponse
	if err := b.operatorCall(ctx, engine, messages.SubjectProcessReadT, &req.APIEnvelope, &req, &resp, messages.APIProcessReadResponseType); err != nil {
		return nil, err
	}
	return &resp, nil
}

// operatorCall sends a repeatable call pinned to engine.
func (b *Backend) operatorCall(ctx context.Context, engine, subjectT string, env *messages.APIEnvelope, req, resp any, respType string) error {
	if engine == "" {
		return &sandbox.InvalidArgumentError{Reason: "name the engine that holds the sandbox"}
	}
	return b.do(ctx, call{subject: messages.Engine(subjectT, b.o.prefix, engine), env: env, req: req, resp: resp, respType: respType,
		pinned: true, engine: engine, repeatable: true})
}
