package service

import (
	"context"
	"errors"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The engine's acts are reported where they happen (sandbox.Observer): the router reports
// acquires, disposals and purges, the backend the commands, file crossings, resets, egress
// windows and sweeps. The service reports to the router's observer only the acts that are its
// own — its states, its daemon's transitions, placement, the calls its tenancy refused, a
// fingerprint's verdict, a host-tools run (through package hosttools) — and puts in each
// call's context what only it knows of the call (sandbox.WithCall): its request ID, trace,
// account, this engine's ID and the handle.

// callContext is ctx carrying what the engine's acts under it need of c. h names the handle
// of an instance: the one the call named, or, for an acquire, the one its answer will carry.
func (s *Service) callContext(ctx context.Context, c *call, h func(instanceID string) string) context.Context {
	sc := sandbox.Call{RequestID: c.requestID, Traceparent: c.traceparent, Service: s.id, Handle: h}
	if c.identity != nil {
		sc.Account = c.identity.Account // tenancy.go
	}
	return sandbox.WithCall(ctx, sc)
}

// namedHandle is the handle of a call that names one: every act under it concerns that handle.
func namedHandle(handle string) func(string) string {
	if handle == "" {
		return nil
	}
	return func(string) string { return handle }
}

// ownContext is the context of an act of the service's own that no call caused: it carries
// this engine's ID, as every act the service reports does.
func (s *Service) ownContext() context.Context {
	return sandbox.WithCall(context.Background(), sandbox.Call{Service: s.id})
}

// engineState reports a state of the engine itself (started, draining, stopped, the daemon's
// transitions).
func (s *Service) engineState(state string, err error) {
	s.obs.EngineStateChanged(s.ownContext(), sandbox.EngineStateChanged{Act: sandbox.Act{Err: err}, State: state})
}

// daemonState reports the daemon's answer to a probe when it changed: away (with what the
// probe met) or back.
func (s *Service) daemonState(reachable bool, err error) {
	if s.jan.daemonDown.Swap(!reachable) == !reachable {
		return
	}
	if reachable {
		s.engineState(sandbox.EngineDaemonBack, nil)
		return
	}
	s.engineState(sandbox.EngineDaemonUnreachable, err)
}

// refused reports a call the service refused before it reached the engine: one its tenancy
// forbids. The sandbox it named is not carried (sandbox.CallRefused).
func (s *Service) refused(ctx context.Context, c *call, err error) {
	var fe *messages.ForbiddenError
	if !errors.As(err, &fe) {
		return
	}
	s.obs.CallRefused(s.callContext(ctx, c, nil), sandbox.CallRefused{Act: sandbox.Act{Took: time.Since(c.start), Err: err}, Op: c.op.name})
}
