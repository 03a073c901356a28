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

// Dispose disposes one exact instance with a dispose call through the pool, under the
// console's identity. It fails with [ErrForbidden] when NATS refuses the identity,
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
	var undisposed *sandbox.DisposalFailure
	if err := c.action(ctx, func(ctx context.Context) (err error) {
		undisposed, err = c.remote.DisposeChecked(ctx, messages.KeyFromWire(&r.Key), sandbox.DisposeOptions{Kind: &kind, InstanceID: r.InstanceID})
		return err
	}); err != nil {
		return nil, err
	}
	c.log.Info("disposed from the console", zap.String("scope", r.Key.Scope), zap.String("container_id", r.InstanceID))
	return &messages.APIDisposeResponse{Undisposed: messages.FailureToWire(undisposed)}, nil
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
	var p sandbox.ScopePurge
	if err := c.action(ctx, func(ctx context.Context) (err error) {
		p, err = c.remote.DisposeScopeChecked(ctx, r.Scope, r.ThreadID)
		return err
	}); err != nil {
		return nil, err
	}
	c.log.Info("purged from the console", zap.String("scope", r.Scope))
	return &messages.APIDisposeScopeResponse{Disposed: p.Disposed, Undisposed: messages.FailureToWire(p.Undisposed)}, nil
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
	var resp *messages.APILameDuckResponse
	if err := c.action(ctx, func(ctx context.Context) (err error) {
		resp, err = c.remote.LameDuck(ctx, r.Engine)
		return err
	}); err != nil {
		return nil, err
	}
	c.log.Info("engine put in lame duck from the console", zap.String("engine", r.Engine), zap.Bool("already", resp.Already))
	return resp, nil
}
