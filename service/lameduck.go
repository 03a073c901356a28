package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// LameDuck makes the engine stop taking new sandboxes while it keeps serving the ones it holds:
// it leaves the shared acquire subject's queue group (the pool's other engines take the cold
// acquires), and with placement it refuses, with an [*EngineUnavailableError] saying it drains,
// an acquire on its own subject of a sandbox it does not own. Health reports "draining" and
// the members bucket Draining. Without placement, acquires on its own subject are still served,
// new keys included. Calling it again does nothing; [Service.Stop] still ends the engine.
func (s *Service) LameDuck() error {
	s.gate.mu.Lock()
	if s.gate.lameDuck || s.gate.closed {
		s.gate.mu.Unlock()
		return nil
	}
	s.gate.lameDuck = true
	s.gate.mu.Unlock()
	s.owner.LameDuck()
	s.log.Info("engine in lame duck: no new sandboxes", zap.Int("sandboxes", s.handles.len()))
	s.obs.PlacementChanged(s.ownContext(), sandbox.PlacementChanged{Change: sandbox.PlacementLameDuck})
	shared := messages.Shared(messages.SubjectAcquireT, s.o.prefix)
	for _, e := range s.eps.all {
		if e.subject == shared && e.sub != nil {
			if err := e.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("leave the shared acquire subject: %w", err)
			}
		}
	}
	// Once the server has the unsubscription, no acquire sent after LameDuck returns is
	// delivered to this engine through the queue group.
	if err := s.nc.FlushTimeout(flushTimeout); err != nil {
		return fmt.Errorf("leave the shared acquire subject: %w", err)
	}
	return nil
}

// lame reports whether the engine is in lame duck.
func (s *Service) lame() bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return s.gate.lameDuck
}

// errLameDuck is the answer to a new sandbox's acquire in lame duck.
func (s *Service) errLameDuck() error {
	return &messages.EngineUnavailableError{Reason: fmt.Sprintf("engine %s is draining: it takes no new sandboxes; acquire through the pool", s.id)}
}

// lameDuck is the lame_duck operation: [Service.LameDuck] through the API, on the engine's
// own subject only (there is no shared one: the pool would pick the engine).
func lameDuck(_ context.Context, s *Service, _ *call, data []byte) (any, error) {
	if _, err := decode[messages.APILameDuckRequest](data); err != nil {
		return nil, err
	}
	already := s.lame()
	if err := s.LameDuck(); err != nil {
		return nil, fmt.Errorf("lame duck: %w", err)
	}
	return &messages.APILameDuckResponse{Engine: s.id, Already: already, Sandboxes: s.handles.len()}, nil
}
