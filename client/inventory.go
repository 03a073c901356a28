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
