package console

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// DisposeRequest names one exact instance to dispose: its key, kind and instance ID.
type DisposeRequest struct {
	Key        messages.APIKey `json:"key"`
	Kind       string          `json:"kind"`
	InstanceID string          `json:"instance_id"`
}

// PurgeRequest names a conversation to purge.
type PurgeRequest struct {
	Scope    string `json:"scope"`
	ThreadID string `json:"thread_id"`
}

// allowed refuses an action the probe found denied.
func (c *Console) allowed(action string) error {
	if c.Actions()[action] == Denied {
		return fmt.Errorf("%s: %w", action, ErrForbidden)
	}
	return nil
}

// Dispose disposes one exact instance with a dispose call on the pool's shared subject,
// under the console's identity. It fails with [ErrForbidden] when NATS refuses the identity,
// with an [*sandbox.InvalidArgumentError] for a request without scope, kind or instance, and
// returns the engine's disposal failure when something may remain.
func (c *Console) Dispose(ctx context.Context, r DisposeRequest) (*messages.APIDisposeResponse, error) {
	if r.Key.Scope == "" || r.Kind == "" || r.InstanceID == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "console: dispose names an exact instance: key scope, kind and instance_id"}
	}
	if err := c.allowed(ActionDispose); err != nil {
		return nil, err
	}
	kind := r.Kind
	key := r.Key
	req := messages.APIDisposeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeRequestType, Key: &key},
		Kind: &kind, InstanceID: r.InstanceID}
	var resp messages.APIDisposeResponse
	if err := c.call(ctx, messages.Shared(messages.SubjectDisposeT, c.o.prefix), req, &resp); err != nil {
		return nil, err
	}
	c.log.Info("disposed from the console", zap.String("scope", key.Scope), zap.String("container_id", r.InstanceID))
	return &resp, nil
}

// Purge disposes every sandbox of a conversation with dispose_scope, under the console's
// identity; it fails as [Console.Dispose] does.
func (c *Console) Purge(ctx context.Context, r PurgeRequest) (*messages.APIDisposeScopeResponse, error) {
	if r.Scope == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "console: purge names a scope"}
	}
	if err := c.allowed(ActionPurge); err != nil {
		return nil, err
	}
	req := messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType,
		Key: &messages.APIKey{Scope: r.Scope, ThreadID: r.ThreadID}}}
	var resp messages.APIDisposeScopeResponse
	if err := c.call(ctx, messages.Shared(messages.SubjectDisposeScopeT, c.o.prefix), req, &resp); err != nil {
		return nil, err
	}
	c.log.Info("purged from the console", zap.String("scope", r.Scope))
	return &resp, nil
}
