package service

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/placement"
)

// WithMembers makes the engine announce itself in m's bucket (package placement) every third
// of its TTL — its ID, daemon, the sandboxes it holds, its cold acquires in flight and whether
// it drains — and leave it at Stop. With [WithPlacement] too, it reads the others' after each
// announcement and hands a cold acquire that came through the pool to a lighter engine
// (balance.go, [placement.Pick]). Default: no announcement.
func WithMembers(m *placement.Members, daemon string) Option {
	return func(o *options) error {
		if m == nil {
			return errOption("nil members bucket")
		}
		o.members, o.daemon = m, daemon
		return nil
	}
}

// member is what the engine announces now.
func (s *Service) member() placement.Member {
	s.mu.Lock()
	draining := s.draining || s.lameDuck
	s.mu.Unlock()
	return placement.Member{Engine: s.id, Daemon: s.o.daemon, Sandboxes: s.handles.len(),
		ColdInFlight: int(s.coldInFlight.Load()), Draining: draining}
}

// announcer announces the engine until stop is closed, then leaves.
func (s *Service) announcer(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	m := s.o.members
	every := m.TTL() / 3
	announce := func() {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		defer cancel()
		if err := m.Announce(ctx, s.member()); err != nil {
			s.log.Debug("announce the engine", zap.Error(err))
		}
		if s.o.placement != nil {
			s.refreshMembers(ctx) // balance.go
		}
	}
	announce()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.Leave(ctx, s.id); err != nil {
				s.log.Debug("leave the members bucket", zap.Error(err))
			}
			cancel()
			return
		case <-t.C:
			announce()
		}
	}
}
