package service

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// balance is the engine's copy of the members' load, read after each announcement, and the
// cold acquires it has handed to each engine since that read: counted on top of the load the
// engine last announced, so that a burst between two announcements does not all go one way.
type balance struct {
	mu      sync.Mutex
	members []placement.Member
	sent    map[string]int
}

func (b *balance) set(members []placement.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members, b.sent = members, map[string]int{}
}

// pick applies [placement.Pick] to self and the members, and counts a hand-off.
func (b *balance) pick(self placement.Member) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ms := make([]placement.Member, len(b.members))
	copy(ms, b.members)
	for i := range ms {
		ms[i].ColdInFlight += b.sent[ms[i].Engine]
	}
	chosen := placement.Pick(self, ms, rand.IntN)
	if chosen != self.Engine {
		b.sent[chosen]++
	}
	return chosen
}

// refreshMembers reads the members' load for the choice of engine.
func (s *Service) refreshMembers(ctx context.Context) {
	ms, err := s.o.members.List(ctx)
	if err != nil {
		s.log.Debug("list the members", zap.Error(err))
		return
	}
	s.balance.set(ms)
}

// balanced hands a cold acquire that came through the pool to a lighter engine
// ([placement.Pick]) and returns that engine's answer, with ok. It does nothing (ok false)
// without placement and members, for an acquire sent to this engine's own subject or
// forwarded, for a key some engine holds (the claim forwards it to its owner), or when the
// chosen engine cannot take it: the acquire is then served here.
func (s *Service) balanced(ctx context.Context, key sandbox.Key, kind string) (answer any, ok bool, err error) {
	p := s.o.placement
	c := callOf(ctx)
	if p == nil || s.o.members == nil || c == nil || c.msg.Subject != messages.Shared(messages.SubjectAcquireT, s.o.prefix) ||
		c.msg.Header.Get(ForwardedHeader) != "" {
		return nil, false, nil
	}
	if r, held := p.Lookup(key, kind); held && time.Now().Before(r.Expires) {
		return nil, false, nil
	}
	self := s.member()
	self.ColdInFlight-- // not counting this acquire, as the others' announcements do not
	chosen := s.balance.pick(self)
	if chosen == s.id {
		return nil, false, nil
	}
	answer, _, err = s.forward(ctx, chosen)
	if errors.Is(err, messages.ErrUnavailable) {
		s.log.Debug("the lighter engine did not take the acquire; serving it here", zap.String("engine", chosen), zap.Error(err))
		return nil, false, nil
	}
	return answer, true, err
}
