package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// lookupContainer asks the supervisor for the actor of one container name.
type lookupContainer struct{ name string }

// containerPID is the supervisor's answer.
type containerPID struct{ pid *actor.PID }

// forward asks the supervisor to deliver env to the actor of name, on behalf of the sender:
// the second attempt of a request whose first one reached no actor (see ask). Delivered by
// the supervisor, it cannot land behind a passivation the supervisor decided, which it sends
// from the same mailbox.
type forward struct {
	name string
	env  *request
}

// quiesce, from Close, ends passivation: the supervisor answers once no actor is retiring, so
// the stop of every actor that follows meets only live ones.
type quiesce struct{}

// Passivation (see passivate.go): the actor asks, the supervisor decides, the actor stops or
// declines. Each carries the incarnation it is about: a name's actors reuse one PID.
type (
	// passivateRequest: actor → supervisor, idle; may it go?
	passivateRequest struct {
		name string
		gen  uint64
	}
	// passivate: supervisor → actor, go if still idle.
	passivate struct{ gen uint64 }
	// passivateDeclined: actor → supervisor, busy again; it stays.
	passivateDeclined struct {
		name string
		gen  uint64
	}
)

// child is the supervisor's record of the one live actor of a name.
type child struct {
	pid *actor.PID
	gen uint64 // the incarnation: a passivated name's next actor has the same PID
	// retiring: asked to passivate and not yet answered. Until the actor declines or has
	// Terminated, lookups and forwards for the name wait here rather than reach it.
	retiring bool
	waiting  []waiter
}

// waiter is a lookup (fwd nil) or a forward held while its name's actor retires.
type waiter struct {
	sender *actor.PID
	fwd    *forward
}

// supervisor owns one container actor per derived container name and restarts a failed one;
// the failed actor's Restarting handler thaws a freeze it held before anything else runs. It
// alone decides that an idle actor stops, and it never spawns a name's next actor before the
// previous one has Terminated: at no moment do two actors serve one name.
type supervisor struct {
	b        *Backend
	children map[string]*child
	names    map[string]string // PID Id → name, for Terminated
	gen      uint64
	retiring int          // children retiring now
	quiet    []*actor.PID // Close's quiesce, answered when retiring is 0
	final    bool         // quiesced: no more passivation
	closing  bool         // stopping with the backend: no new actor, waiters dead-lettered
}

func newSupervisor(b *Backend) *supervisor {
	return &supervisor{b: b, children: map[string]*child{}, names: map[string]string{}}
}

// restartStrategy restarts a failed container actor, at most 10 times in 10 seconds.
func restartStrategy() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(10, 10*time.Second, func(reason any) actor.Directive {
		return actor.RestartDirective
	})
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *lookupContainer:
		s.route(ctx, m.name, waiter{sender: ctx.Sender()})
	case *forward:
		s.route(ctx, m.name, waiter{sender: ctx.Sender(), fwd: m})
	case *passivateRequest:
		s.passivateAsked(ctx, m)
	case *passivateDeclined:
		s.passivateDeclined(ctx, m)
	case *quiesce:
		s.final = true
		s.quiet = append(s.quiet, ctx.Sender())
		s.settled(ctx)
	case *containerChanged:
		s.b.watch.noteLag(m.At)
		// A retiring actor may already be gone: it gets a reset if it stays instead.
		if c, ok := s.children[m.Name]; ok && !c.retiring {
			ctx.Send(c.pid, m)
		}
	case *watchReset:
		s.broadcast(ctx, m)
	case *actor.Terminated:
		s.terminated(ctx, m.Who)
	case *actor.Stopping:
		s.stopping(ctx)
	}
}

// passivateAsked retires the child that asked, unless the request is stale or duplicate or
// the backend is closing (it stops the child anyway).
func (s *supervisor) passivateAsked(ctx actor.Context, m *passivateRequest) {
	c := s.children[m.name]
	if s.final || c == nil || c.gen != m.gen || c.retiring {
		return
	}
	c.retiring = true
	s.retiring++
	ctx.Send(c.pid, &passivate{gen: c.gen})
}

// passivateDeclined takes back a child that found work while it retired.
func (s *supervisor) passivateDeclined(ctx actor.Context, m *passivateDeclined) {
	if c := s.children[m.name]; c != nil && c.gen == m.gen && c.retiring {
		s.retired(ctx, c)
		ctx.Send(c.pid, &watchReset{}) // it was sent no events while it retired
		s.release(ctx, c)
	}
}

// broadcast sends m to every child that is not retiring.
func (s *supervisor) broadcast(ctx actor.Context, m any) {
	for _, c := range s.children {
		if !c.retiring {
			ctx.Send(c.pid, m)
		}
	}
}

// stopping dead-letters every lookup and forward still waiting for a retiring child.
func (s *supervisor) stopping(ctx actor.Context) {
	s.closing = true
	for _, c := range s.children {
		for _, w := range c.waiting {
			deadLetter(ctx, w.sender)
		}
		c.waiting = nil
	}
}

// route answers a lookup or delivers a forward, or holds it while the name's actor retires.
func (s *supervisor) route(ctx actor.Context, name string, w waiter) {
	if s.closing {
		deadLetter(ctx, w.sender)
		return
	}
	c := s.children[name]
	if c == nil {
		c = s.spawn(ctx, name)
	}
	if c.retiring {
		c.waiting = append(c.waiting, w)
		if s.b.actorHook != nil {
			s.b.actorHook(name, callHeld)
		}
		return
	}
	s.deliver(ctx, c, w)
}

func (s *supervisor) deliver(ctx actor.Context, c *child, w waiter) {
	if w.fwd != nil {
		ctx.RequestWithCustomSender(c.pid, w.fwd.env, w.sender)
		return
	}
	if w.sender != nil {
		ctx.Send(w.sender, &containerPID{pid: c.pid})
	}
}

// release hands the waiters of c, in arrival order, to c's actor.
func (s *supervisor) release(ctx actor.Context, c *child) {
	waiting := c.waiting
	c.waiting = nil
	for _, w := range waiting {
		s.deliver(ctx, c, w)
	}
}

// retired records that c no longer retires: it declined, or it has Terminated.
func (s *supervisor) retired(ctx actor.Context, c *child) {
	if c.retiring {
		c.retiring = false
		s.retiring--
		s.settled(ctx)
	}
}

// settled answers Close's quiesce once no actor retires.
func (s *supervisor) settled(ctx actor.Context) {
	if s.retiring > 0 {
		return
	}
	for _, to := range s.quiet {
		if to != nil {
			ctx.Send(to, &quiesce{})
		}
	}
	s.quiet = nil
}

// terminated forgets a stopped actor, and its memory with it; the calls that waited for it
// go to the name's next actor, spawned only now that the old one can no longer run.
func (s *supervisor) terminated(ctx actor.Context, who *actor.PID) {
	name, ok := s.names[who.Id]
	if !ok {
		return
	}
	delete(s.names, who.Id)
	c := s.children[name]
	delete(s.children, name)
	if c == nil {
		return
	}
	s.retired(ctx, c)
	if len(c.waiting) == 0 || s.closing {
		return
	}
	next := s.spawn(ctx, name)
	next.waiting = c.waiting
	s.release(ctx, next)
}

func (s *supervisor) spawn(ctx actor.Context, name string) *child {
	s.gen++
	t := &tenure{name: name, gen: s.gen, system: ctx.ActorSystem(), hook: s.b.actorHook}
	mem := &memory{}
	props := actor.PropsFromProducer(func() actor.Actor { return newContainerActor(s.b, name, mem, t) },
		actor.WithMailbox(actor.Unbounded(t)))
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		// Only the actor of a map this supervisor lost (a restart of the supervisor itself)
		// can hold the name: protoactor refuses a second one, and pid is that actor's.
		s.b.log.Debug("spawn container actor", zap.String("container", name), zap.Error(err))
	}
	c := &child{pid: pid, gen: s.gen}
	s.children[name] = c
	s.names[pid.Id] = name
	return c
}

// deadLetter answers a request the supervisor will not serve as protoactor answers one sent
// to a stopped actor, so the caller's ask ends at once.
func deadLetter(ctx actor.Context, to *actor.PID) {
	if to != nil {
		ctx.Send(to, &actor.DeadLetterResponse{})
	}
}
