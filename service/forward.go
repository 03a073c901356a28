package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// The transport of a forward: the request a call carries, sent to the engine that owns its
// sandbox ([placement.Owner] decides which) on that engine's own subject, and its reply
// relayed back as this call's answer.

// ForwardedHeader marks an acquire one engine forwarded to the sandbox's owner; the owner does
// not forward it again, so a placement that moves mid-call cannot bounce a request around.
const ForwardedHeader = "Maf-Sandbox-Forwarded-By"

// forward sends the acquire this call carries to owner's own acquire subject and returns its
// answer. An acquire that was itself forwarded is not forwarded again: the client retries it.
func (s *Service) forward(ctx context.Context, owner string) (any, error) {
	c := callOf(ctx)
	if c == nil {
		return nil, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the sandbox is placed on engine %s, which this forwarded call did not reach", owner)}
	}
	var resp messages.APIAcquireResponse
	if err := s.relayed(ctx, messages.SubjectEngineAcquireT, owner, c.msg.Data, &resp); err != nil {
		return nil, err
	}
	s.log.Debug("forwarded an acquire to its owner", zap.String("owner", owner))
	return &resp, nil
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
