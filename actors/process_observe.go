package actors

import (
	"context"
	"sync"
	"time"

	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// What the backend tells its observer (report.go) of its processes: a start when a start
// made a process, an end once per process and engine, by whoever follows it: the pump that
// stored its exit (with a store), a waiter on the supervisor (without one), or the docker
// exec that ended.

// procWaiters are the supervisor's processes a waiter follows to their end (no store).
type procWaiters struct {
	mu      sync.Mutex
	waiting map[string]bool // instance/id
}

// reportStarted tells the observer that sb started p, under the start's ctx.
func (b *Backend) reportStarted(ctx context.Context, sb *Sandbox, p sandbox.Process) {
	if o := b.observer(); o != nil && p.Created {
		o.ProcessStarted(context.WithoutCancel(ctx), sandbox.ProcessStarted{Act: sb.act(time.Now(), nil), Process: p})
	}
}

// reportExited tells the observer that p, of sb's instance, ended. An end is seen by a
// follower, not by a call: it carries no caller.
func (b *Backend) reportExited(sb *Sandbox, p sandbox.Process) {
	if o := b.observer(); o != nil && p.Exit != nil {
		o.ProcessExited(context.Background(), sandbox.ProcessExited{Act: sb.act(time.Now(), nil), Process: p})
	}
}

// waitEnd follows a supervisor's process to its end when no store does (a pump reports it
// then), so that its end is reported: one waiter per process and engine.
func (b *Backend) waitEnd(sb *Sandbox, id string) {
	if b.procStore != nil || b.observer() == nil {
		return
	}
	k := sb.inst().id + "/" + id
	b.procObs.mu.Lock()
	if b.procObs.waiting == nil {
		b.procObs.waiting = map[string]bool{}
	}
	if b.procObs.waiting[k] {
		b.procObs.mu.Unlock()
		return
	}
	b.procObs.waiting[k] = true
	b.procObs.mu.Unlock()
	go func() {
		defer func() {
			b.procObs.mu.Lock()
			delete(b.procObs.waiting, k)
			b.procObs.mu.Unlock()
		}()
		ctx := b.life
		for ctx.Err() == nil {
			route, err := sb.processRoute(ctx, "", false)
			if err != nil || route.Route == nil {
				return // the sandbox is gone: its disposal reported, or nobody can tell
			}
			rep, err := channelCall(ctx, sb.name, route.Route, execwire.CallRequest{Op: execwire.OpWait, ID: id})
			if err == nil && rep.Process != nil {
				b.reportExited(sb, processFromWire(*rep.Process))
				return
			}
			if err == nil {
				return // the supervisor does not have it
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}()
}

// watchListed reports the ends a list shows and follows the rest, after an acquire of an
// instance another engine may have followed (without a store; a pump does it with one).
func (b *Backend) watchListed(sb *Sandbox, listed []sandbox.Process) {
	if b.procStore != nil || b.observer() == nil {
		return
	}
	for _, p := range listed {
		switch {
		case p.Transport != sandbox.TransportSupervisor:
		case p.Exit != nil:
			b.reportExited(sb, p)
		default:
			b.waitEnd(sb, p.ID)
		}
	}
}
