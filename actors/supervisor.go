package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
)

// lookupContainer asks the supervisor for the actor of one container name.
type lookupContainer struct{ name string }

// containerPID is the supervisor's answer.
type containerPID struct{ pid *actor.PID }

// supervisor owns one container actor per derived container name and restarts a failed one;
// the failed actor's Restarting handler thaws a freeze it held before anything else runs.
type supervisor struct {
	b        *Backend
	children map[string]*actor.PID
}

func newSupervisor(b *Backend) *supervisor {
	return &supervisor{b: b, children: map[string]*actor.PID{}}
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
		ctx.Respond(&containerPID{pid: s.child(ctx, m.name)})
	case *messages.ContainerChanged:
		if pid, ok := s.children[m.Name]; ok {
			ctx.Send(pid, m)
		}
	case *watchReset:
		for _, pid := range s.children {
			ctx.Send(pid, m)
		}
	case *actor.Terminated:
		for name, pid := range s.children {
			if pid.Equal(m.Who) {
				delete(s.children, name)
			}
		}
	}
}

func (s *supervisor) child(ctx actor.Context, name string) *actor.PID {
	if pid, ok := s.children[name]; ok {
		return pid
	}
	mem := &memory{}
	props := actor.PropsFromProducer(func() actor.Actor { return newContainerActor(s.b, name, mem) })
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		// The name is unique per supervisor, so this is the actor a lost map entry forgot.
		s.b.log.Debug("spawn container actor", zap.String("container", name), zap.Error(err))
	}
	s.children[name] = pid
	return pid
}
