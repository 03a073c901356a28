package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// The transport of a forward (placement.Forwarder): the request a call carries, sent to the
// engine that owns its sandbox (the owner, placement.Owner, decides which) on that engine's
// own subject, and its reply relayed back as this call's answer.

// ForwardedHeader marks a call one engine forwarded to the sandbox's owner; the owner does not
// forward it again, so a placement that moves mid-call cannot bounce a request around.
const ForwardedHeader = "Maf-Sandbox-Forwarded-By"

// forwarder is the service's placement.Forwarder.
type forwarder struct{ s *Service }

var _ placement.Forwarder = forwarder{}

// Acquire sends the acquire the call carries to engine's own acquire subject; its answer is the
// call's ([call.forwarded]). An engine that does not answer did not take it.
func (f forwarder) Acquire(ctx context.Context, engine string) (bool, error) {
	c := callOf(ctx)
	if c == nil {
		return false, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the sandbox is placed on engine %s, which this call did not reach", engine)}
	}
	var resp messages.APIAcquireResponse
	if err := f.s.relayed(ctx, messages.SubjectEngineAcquireT, engine, c.msg.Data, &resp); err != nil {
		return !errors.Is(err, messages.ErrUnavailable), err
	}
	f.s.log.Debug("forwarded an acquire to its owner", zap.String("owner", engine))
	c.forwarded = &resp
	return true, nil
}

// Dispose sends a dispose of key, narrowed by opts, to engine's own dispose subject.
func (f forwarder) Dispose(ctx context.Context, engine string, key sandbox.Key, opts sandbox.DisposeOptions) (*sandbox.DisposalFailure, *sandbox.DisposalFailure) {
	req := &messages.APIDisposeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeRequestType, Key: messages.KeyToWire(key)},
		Kind: opts.Kind, InstanceID: opts.InstanceID}
	var resp messages.APIDisposeResponse
	if unanswered := f.s.forwardDisposal(ctx, messages.SubjectEngineDisposeT, engine, req, &resp); unanswered != nil {
		return nil, unanswered
	}
	return messages.FailureFromWire(resp.Undisposed), nil
}

// DisposeScope sends a purge of (scope, thread) to engine's own purge subject.
func (f forwarder) DisposeScope(ctx context.Context, engine, scope, thread string) (sandbox.ScopePurge, *sandbox.DisposalFailure) {
	req := &messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType,
		Key: &messages.APIKey{Scope: scope, ThreadID: thread}}}
	var resp messages.APIDisposeScopeResponse
	if unanswered := f.s.forwardDisposal(ctx, messages.SubjectEngineDisposeScopeT, engine, req, &resp); unanswered != nil {
		return sandbox.ScopePurge{}, unanswered
	}
	return sandbox.ScopePurge{Disposed: resp.Disposed, Undisposed: messages.FailureFromWire(resp.Undisposed)}, nil
}

// Balanced reports an acquire that came through the pool's shared subject, not forwarded.
func (f forwarder) Balanced(ctx context.Context) bool {
	c := callOf(ctx)
	return c != nil && c.msg.Subject == messages.Shared(messages.SubjectAcquireT, f.s.o.prefix) && c.msg.Header.Get(ForwardedHeader) == ""
}

// Forwarded reports a call another engine forwarded here (or one no request made).
func (f forwarder) Forwarded(ctx context.Context) bool {
	c := callOf(ctx)
	return c == nil || c.msg.Header.Get(ForwardedHeader) != ""
}

// forwardDisposal sends req to owner's own subject of subjectT and decodes the reply into resp.
// It returns a failure when the owner did not answer or answered with an error, nil when resp
// holds its answer.
func (s *Service) forwardDisposal(ctx context.Context, subjectT, owner string, req, resp any) *sandbox.DisposalFailure {
	data, err := json.Marshal(req)
	if err == nil {
		err = s.relayed(ctx, subjectT, owner, data, resp)
	}
	if err == nil {
		s.log.Debug("forwarded a disposal to the owner", zap.String("owner", owner), zap.String("subject", subjectT))
		return nil
	}
	code := sandbox.DisposalUnknown
	switch {
	case errors.Is(err, messages.ErrUnavailable):
		code = sandbox.DisposalUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = sandbox.DisposalTimeout
	case errors.Is(err, sandbox.ErrRefused): // the owner refused the caller (forbidden, tenancy.go)
		code = sandbox.DisposalRefused
	}
	return &sandbox.DisposalFailure{Code: code, Detail: fmt.Sprintf("a sandbox named is engine %s's to dispose: %v", owner, err)}
}

// relay sends data, a request of this call's, to engine owner's own subject of subjectT, marked
// as forwarded, and returns the reply. A call that was itself forwarded is not forwarded again
// ([*EngineUnavailableError], as when the owner does not answer): the client retries it.
func (s *Service) relay(ctx context.Context, subjectT, owner string, data []byte) (*nats.Msg, error) {
	c := callOf(ctx)
	if c == nil || c.msg.Header.Get(ForwardedHeader) != "" {
		return nil, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the sandbox is placed on engine %s, which this forwarded call did not reach", owner)}
	}
	h := c.headers()
	h.Set(ForwardedHeader, s.id)
	forwardIdentity(h, c.identity) // tenancy.go: the owner serves the caller, not this engine
	subject := messages.Engine(subjectT, s.o.prefix, owner)
	// A reply subscription of its own, gone when the call is: the connection's shared request
	// inbox would stay subscribed, and Stop waits for the service's subscriptions to go.
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Header: h, Data: data}); err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, &messages.EngineUnavailableError{Subject: subject, Reason: fmt.Sprintf("the sandbox's owner, engine %s, does not answer; its lease must lapse before another engine takes it", owner)}
	}
	if err != nil {
		return nil, fmt.Errorf("forward the %s to engine %s: %w", c.op.name, owner, err)
	}
	return msg, nil
}

// relayed relays data as relay does and decodes the owner's reply into resp, a response type
// of package messages; the error the owner answered is returned as the error it stands for.
func (s *Service) relayed(ctx context.Context, subjectT, owner string, data []byte, resp any) error {
	msg, err := s.relay(ctx, subjectT, owner, data)
	if err != nil {
		return err
	}
	var head messages.APIResponse
	if err := json.Unmarshal(msg.Data, &head); err != nil {
		return &messages.InternalError{Message: fmt.Sprintf("engine %s answered the forwarded call with no JSON: %v", owner, err)}
	}
	if head.Error != nil {
		return messages.DecodeError(head.Error)
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return &messages.InternalError{Message: fmt.Sprintf("engine %s answered the forwarded call with no %T: %v", owner, resp, err)}
	}
	return nil
}
