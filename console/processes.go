package console

import (
	"context"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The processes of one sandbox, as the page lists them and tails one: process_list and
// process_read on the engine that holds the sandbox, under the console's identity (an engine
// with tenancy answers only for a sandbox the console's account acquired).

// ProcessesRequest names one sandbox: the engine that holds it, its handle and its key.
type ProcessesRequest struct {
	Engine  string          `json:"engine"`
	Sandbox string          `json:"sandbox"`
	Key     messages.APIKey `json:"key"`
}

// ProcessOutputRequest reads one process's output from a sequence, waiting up to FollowMS
// (at most maxFollow) for more.
type ProcessOutputRequest struct {
	ProcessesRequest
	ID       string `json:"id"`
	Seq      int64  `json:"seq"`
	FollowMS int64  `json:"follow_ms"`
}

// maxFollowMS bounds how long one of the page's reads waits for output. Actions and reads take
// turns (Console.action), so a tail's wait is the longest a click on dispose or pause waits
// behind it; the page asks for 1 s.
const maxFollowMS = 2_000

func (r ProcessesRequest) check() error {
	if r.Engine == "" || r.Sandbox == "" || r.Key.Scope == "" {
		return &sandbox.InvalidArgumentError{Reason: "console: processes name an engine, a sandbox handle and its key"}
	}
	return nil
}

func (r ProcessesRequest) envelope(typ string) messages.APIEnvelope {
	key := r.Key
	return messages.APIEnvelope{Type: typ, Key: &key, Sandbox: r.Sandbox}
}

// Processes lists a sandbox's processes. It fails with [ErrForbidden] when NATS or the engine
// refuses the console's identity.
func (c *Console) Processes(ctx context.Context, r ProcessesRequest) (*messages.APIProcessListResponse, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	req := messages.APIProcessListRequest{APIEnvelope: r.envelope(messages.APIProcessListRequestType)}
	var resp *messages.APIProcessListResponse
	err := c.action(ctx, func(ctx context.Context) (err error) {
		resp, err = c.remote.ListProcessesOf(ctx, r.Engine, req)
		return err
	})
	return resp, err
}

// ProcessOutput reads one process's output from a sequence; it fails as [Console.Processes].
func (c *Console) ProcessOutput(ctx context.Context, r ProcessOutputRequest) (*messages.APIProcessReadResponse, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if r.ID == "" || r.Seq < 0 || r.FollowMS < 0 {
		return nil, &sandbox.InvalidArgumentError{Reason: "console: a process read names the process and a sequence from 0"}
	}
	req := messages.APIProcessReadRequest{APIEnvelope: r.envelope(messages.APIProcessReadRequestType), ID: r.ID, Seq: r.Seq,
		FollowMS: min(r.FollowMS, maxFollowMS)}
	var resp *messages.APIProcessReadResponse
	err := c.action(ctx, func(ctx context.Context) (err error) {
		resp, err = c.remote.ReadProcessOf(ctx, r.Engine, req)
		return err
	})
	return resp, err
}
