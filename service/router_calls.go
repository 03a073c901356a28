package service

import (
	"context"
	"errors"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// The calls that are not addressed to one sandbox: acquire, dispose, dispose scope, reap,
// declarations and health. They are answered on shared subjects (one engine of the pool)
// and on each engine's own.

func acquire(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APIAcquireRequest](data)
	if err != nil {
		return nil, err
	}
	key, err := requireKey(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	if req.Sandbox != "" {
		return nil, &messages.BadRequestError{Reason: "an acquire names no sandbox handle: it returns one"}
	}
	spec, err := messages.SpecFromWire(req.Spec)
	if err != nil {
		return nil, err
	}
	// The acquire's act names the handle its answer will carry (report.go).
	ctx = s.callContext(ctx, c, s.handles.reserver(key, spec.Kind))
	sb, err := s.owner.Acquire(ctx, key, spec) // placement.Owner: a layer around the router
	var re *placement.RouteError
	switch {
	case errors.Is(err, placement.ErrForwarded):
		return c.forwarded, nil // the owner's answer
	case errors.As(err, &re):
		return nil, s.placementError(re.Err) // placement.go
	case err != nil:
		return nil, err
	}
	h := s.handles.put(key, spec, sb, c.callerAccount())
	out := &messages.APISandbox{ID: h.id, Engine: s.id, Kind: spec.Kind, InstanceID: sb.InstanceID()}
	if b, ok := sb.(interface{ WorkDir() string }); ok {
		out.WorkDir = b.WorkDir()
	}
	if f, ok := sb.(sandbox.Fresh); ok {
		out.Created = f.Created()
	}
	return &messages.APIAcquireResponse{Sandbox: out}, nil
}

func dispose(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIDisposeRequest](data)
	if err != nil {
		return nil, err
	}
	key, err := requireKey(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	var kind *string
	if req.Kind != nil {
		k := *req.Kind
		kind = &k
	}
	opts := sandbox.DisposeOptions{Kind: kind, InstanceID: req.InstanceID}
	f, here := s.owner.Dispose(ctx, key, opts) // placement.Owner: a layer around the router
	if here {
		s.transfers.forget(s.handles.drop(func(h *handle) bool {
			return h.key == key && (opts.Kind == nil || h.kind == *opts.Kind) &&
				(opts.InstanceID == "" || h.instanceID() == opts.InstanceID)
		}))
	}
	return &messages.APIDisposeResponse{Undisposed: messages.FailureToWire(f)}, nil
}

func disposeScope(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIDisposeScopeRequest](data)
	if err != nil {
		return nil, err
	}
	key, err := requireKey(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	p, here := s.owner.DisposeScope(ctx, key.Scope, key.ThreadID) // placement.Owner: a layer around the router
	if here {
		s.transfers.forget(s.handles.drop(func(h *handle) bool {
			return h.key.Scope == key.Scope && h.key.ThreadID == key.ThreadID
		}))
	}
	return &messages.APIDisposeScopeResponse{Disposed: p.Disposed, Undisposed: messages.FailureToWire(p.Undisposed)}, nil
}

func reap(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	req, err := decode[messages.APIReapRequest](data)
	if err != nil {
		return nil, err
	}
	if req.OlderThanMS <= 0 {
		return nil, &sandbox.InvalidArgumentError{Reason: "reap: older_than_ms must be positive"}
	}
	if s.o.reaper == nil {
		return nil, &sandbox.UnsupportedError{Backend: backendName(s), Op: "Reap",
			Reason: "this engine's backend offers no age-based sweep yet; dispose by key or scope instead"}
	}
	r, err := s.o.reaper.Reap(ctx, millis(req.OlderThanMS), req.Scope)
	if err != nil {
		return nil, err
	}
	return &messages.APIReapResponse{APIReapResult: messages.ReapToWire(r)}, nil
}

func declarations(_ context.Context, s *Service, _ *call, data []byte) (any, error) {
	if _, err := decode[messages.APIDeclarationsRequest](data); err != nil {
		return nil, err
	}
	out := &messages.APIDeclarationsResponse{Engine: s.id, Backends: []messages.APIBackend{},
		ChunkSize: s.o.chunkSize, MaxRequestBytes: s.o.maxRequestBytes, MaxFileBytes: s.o.maxFileBytes}
	if b := s.router.Backend(); b != nil {
		out.Selected = b.Name()
		out.Backends = append(out.Backends, messages.APIBackend{Name: b.Name(), Isolation: string(b.Isolation()),
			Declarations: messages.DeclarationsToWire(b.Declarations())})
	}
	return out, nil
}

func health(ctx context.Context, s *Service, _ *call, data []byte) (any, error) {
	if _, err := decode[messages.APIHealthRequest](data); err != nil {
		return nil, err
	}
	daemon := s.daemonHealth(ctx)
	s.gate.mu.Lock()
	status, inFlight := HealthOK, s.gate.inFlight-1 // not counting this call
	switch {
	case s.gate.draining || s.gate.lameDuck:
		status = HealthDraining
	case daemon != nil && !daemon.Reachable:
		status = HealthEngineUnavailable
	}
	s.gate.mu.Unlock()
	out := &messages.APIHealthResponse{Engine: s.id, Version: s.o.version, Status: status, StartedAt: s.started,
		InFlight: inFlight, Sandboxes: s.handles.len(), Backends: []string{}, Daemon: daemon, LastError: s.failures.get(),
		Events: s.eventsHealth()}
	if b := s.router.Backend(); b != nil {
		out.Backends = append(out.Backends, b.Name())
	}
	return out, nil
}
