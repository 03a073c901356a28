package client

import (
	"context"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// LameDuck puts one engine (engine, or the pinned one when engine is "") in lame duck: it
// takes no new sandboxes and keeps serving those it holds. It fails with an
// [*sandbox.InvalidArgumentError] when no engine is named, with a [*messages.ForbiddenError]
// when the engine's tenancy does not count the caller an operator, and with an
// [*messages.EngineUnavailableError] when that engine does not answer.
func (b *Backend) LameDuck(ctx context.Context, engine string) (*messages.APILameDuckResponse, error) {
	if engine == "" {
		engine = b.o.engine
	}
	if engine == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "lame duck: name an engine"}
	}
	req := messages.APILameDuckRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APILameDuckRequestType}}
	var resp messages.APILameDuckResponse
	c := call{subject: messages.Engine(messages.SubjectEngineLameDuckT, b.o.prefix, engine), env: &req.APIEnvelope, req: &req,
		resp: &resp, respType: messages.APILameDuckResponseType, pinned: true, engine: engine, repeatable: true}
	if err := b.do(ctx, c); err != nil {
		return nil, err
	}
	return &resp, nil
}
