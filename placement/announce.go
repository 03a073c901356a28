package placement

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// balance is the owner's copy of the members' load, read after each announcement, and the
// cold acquires it has handed to each engine since that read: counted on top of the load the
// engine last announced, so that a burst between two announcements does not all go one way.
type balance struct {
	mu      sync.Mutex
	members []Member
	sent    map[string]int
}

func (b *balance) set(members []Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members, b.sent = members, map[string]int{}
}

// pick applies [Pick] to self and the members, and counts a hand-off.
func (b *balance) pick(self Member) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ms := make([]Member, len(b.members))
	copy(ms, b.members)
	for i := range ms {
		ms[i].ColdInFlight += b.sent[ms[i].Engine]
	}
	chosen := Pick(self, ms, rand.IntN)
	if chosen != self.Engine {
		b.sent[chosen]++
	}
	return chosen
}

// Lighter returns the engine a cold acquire of (key, kind) that came through the pool should
// be handed to ([Pick]), or "" to serve it here: always "" without a store and members, and
// for a key some engine holds (its owner serves it, [Owner.Route]). The acquire asking is
// counted in ([Owner.Acquiring]) and left out of this engine's load, as the others'
// announcements leave theirs out. When the chosen engine does not take the acquire, the engine
// serves it here.
func (ow *Owner) Lighter(key sandbox.Key, kind string) string {
	if ow.o.store == nil || ow.o.members == nil {
		return ""
	}
	if r, held := ow.o.store.Lookup(key, kind); held && time.Now().Before(r.Expires) {
		return ""
	}
	self := ow.member()
	self.ColdInFlight--
	if chosen := ow.balance.pick(self); chosen != ow.engine {
		return chosen
	}
	return ""
}

// member is what the engine announces now.
func (ow *Owner) member() Member {
	sandboxes, draining := ow.o.load()
	return Member{Engine: ow.engine, Daemon: ow.o.daemon, Sandboxes: sandboxes,
		ColdInFlight: int(ow.cold.Load()), Draining: draining || ow.lame.Load()}
}

// announcer announces the engine until Stop, then leaves; with a store it reads the members'
// load after each announcement, for Lighter.
func (ow *Owner) announcer() {
	defer ow.done.Done()
	m := ow.o.members
	every := m.TTL() / 3
	announce := func() {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		defer cancel()
		if err := m.Announce(ctx, ow.member()); err != nil {
			ow.log.Debug("announce the engine", zap.Error(err))
		}
		if ow.o.store == nil {
			return
		}
		ms, err := m.List(ctx)
		if err != nil {
			ow.log.Debug("list the members", zap.Error(err))
			return
		}
		ow.balance.set(ms)
	}
	announce()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ow.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.Leave(ctx, ow.engine); err != nil {
				ow.log.Debug("leave the members bucket", zap.Error(err))
			}
			cancel()
			return
		case <-t.C:
			announce()
		}
	}
}
