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

// LameDuckRequest names the engine to put in lame duck.
type LameDuckRequest struct {
	Engine string `json:"engine"`
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

// LameDuck puts one engine in lame duck with a lame_duck call on its own subject, under the
// console's identity; it fails as [Console.Dispose] does (an engine's tenancy refuses anyone
// but an operator: [ErrForbidden]).
func (c *Console) LameDuck(ctx context.Context, r LameDuckRequest) (*messages.APILameDuckResponse, error) {
	if r.Engine == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "console: lame duck names an engine"}
	}
	if err := c.allowed(ActionLameDuck); err != nil {
		return nil, err
	}
	req := messages.APILameDuckRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APILameDuckRequestType}}
	var resp messages.APILameDuckResponse
	if err := c.call(ctx, messages.Engine(messages.SubjectEngineLameDuckT, c.o.prefix, r.Engine), req, &resp); err != nil {
		return nil, err
	}
	c.log.Info("engine put in lame duck from the console", zap.String("engine", r.Engine), zap.Bool("already", resp.Already))
	return &resp, nil
}
