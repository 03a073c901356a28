package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
)

// silentPolls is how many polls in a row an engine may miss before the console forgets it
// and the sandboxes it listed.
const silentPolls = 3

// loop probes the actions, then polls the engines until Close.
func (c *Console) loop() {
	defer close(c.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(c.o.poll)
	defer tick.Stop()
	for {
		c.probe(ctx)
		c.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe asks each action's subject, still unknown, with the client's probe: a request every
// engine refuses as a bad request before it acts. An answer means the identity may publish
// there, a permissions violation that it may not.
func (c *Console) probe(ctx context.Context) {
	probes := map[string]struct{ op, engine string }{
		ActionDispose: {client.ProbeDispose, ""},
		ActionPurge:   {client.ProbeDisposeScope, ""},
	}
	// lame_duck has no shared subject: probe an engine the console knows.
	if engine := c.anyEngine(); engine != "" {
		probes[ActionLameDuck] = struct{ op, engine string }{client.ProbeLameDuck, engine}
	}
	for action, p := range probes {
		if c.Actions()[action] != Unknown {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.action(pctx, func(ctx context.Context) error { return c.remote.Probe(ctx, p.op, p.engine) })
		cancel()
		var st string
		switch {
		case err == nil: // answered: a bad request, as it should be
			st = Allowed
		case errors.Is(err, ErrForbidden):
			st = Denied
		default: // unanswered, or the console stops
			continue
		}
		c.mu.Lock()
		c.actions[action] = st
		c.mu.Unlock()
		c.log.Info("action probed", zap.String("op", action), zap.String("state", st))
		c.state.mu.Lock()
		c.state.hub.send(update{"actions", c.Actions()})
		c.state.mu.Unlock()
	}
}

// anyEngine is one engine the console listed, or "".
func (c *Console) anyEngine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.listed {
		return id
	}
	return ""
}

// poll asks $SRV.STATS of the pool's engines, then each engine's health; lists the
// sandboxes of an engine seen for the first time or not listed for a reconcile interval, and
// forgets an engine silent for [silentPolls] polls.
func (c *Console) poll(ctx context.Context) {
	stats, err := c.remote.Engines(ctx, min(c.o.poll/2, 500*time.Millisecond))
	if err != nil {
		c.log.Debug("stats", zap.Error(err))
	}
	found := map[string]*Engine{}
	for _, st := range stats {
		id := st.ID
		e := &Engine{ID: id, Version: st.Version, StartedAt: st.StartedAt, Status: "ok", LastSeen: time.Now(),
			Requests: st.Requests, Errors: st.Errors, Refused: st.Refused}
		hctx, cancel := context.WithTimeout(ctx, max(c.o.poll, time.Second))
		if h, err := c.remote.EngineHealth(hctx, id); err == nil {
			e.Status, e.Sandboxes, e.InFlight = h.Status, h.Sandboxes, h.InFlight
			if h.Daemon != nil && !h.Daemon.Reachable {
				e.Daemon = "unreachable"
			}
		} else {
			c.log.Debug("health", zap.String("engine", id), zap.Error(err))
		}
		cancel()
		found[id] = e
	}
	c.mu.Lock()
	var list, forget []string
	for id := range found {
		c.silent[id] = 0
		if time.Since(c.listed[id]) >= c.o.reconcile {
			list = append(list, id)
		}
	}
	for id := range c.listed {
		if _, ok := found[id]; !ok {
			if c.silent[id]++; c.silent[id] >= silentPolls {
				forget = append(forget, id)
				delete(c.silent, id)
				delete(c.listed, id) // its refusal stays: said and logged once until a listing succeeds
			}
		}
	}
	c.mu.Unlock()
	c.state.setEngines(found)
	for _, id := range forget {
		c.state.forgetEngine(id)
	}
	for _, id := range list {
		c.list(ctx, id)
	}
}

// list reads every page of engine's sandboxes and puts them in the view.
func (c *Console) list(ctx context.Context, engine string) {
	asked := time.Now()
	var all []messages.APISandboxEntry
	req := messages.APIListSandboxesRequest{Scope: c.o.scope, Limit: 1000}
	for {
		var resp *messages.APIListSandboxesResponse
		err := c.action(ctx, func(ctx context.Context) (err error) { // a refusal by NATS or the engine is ErrForbidden
			resp, err = c.remote.ListSandboxes(ctx, engine, req)
			return err
		})
		if err != nil {
			c.listFailed(engine, asked, err)
			return
		}
		all = append(all, resp.Sandboxes...)
		if resp.Next == "" {
			break
		}
		req.After = resp.Next
	}
	c.mu.Lock()
	c.listed[engine] = asked
	delete(c.refused, engine)
	clear := len(c.refused) == 0
	c.mu.Unlock()
	c.state.listed(engine, asked, all)
	if clear {
		c.state.setNotice("")
	}
}

// listFailed takes a failed listing of engine's sandboxes. A refusal is not asked again
// before the next reconcile, is logged once until a listing succeeds, and is said on the page
// with the engine's reason and what to change: it will not pass by itself. Anything else (an
// engine that did not answer) is asked again at the next poll.
func (c *Console) listFailed(engine string, asked time.Time, err error) {
	if !errors.Is(err, ErrForbidden) {
		c.log.Debug("list sandboxes", zap.String("engine", engine), zap.Error(err))
		return
	}
	c.mu.Lock()
	c.listed[engine] = asked
	first := !c.refused[engine]
	c.refused[engine] = true
	c.mu.Unlock()
	if first {
		c.log.Warn("the engine refuses to list sandboxes to this console", zap.String("engine", engine), zap.Error(err))
	}
	c.state.setNotice(c.refusalNotice(err))
}

// refusalNotice is what the page says when the engines refuse to list sandboxes: why, in the
// engine's words when it gave a reason, and what to change.
func (c *Console) refusalNotice(err error) string {
	why := "the NATS server refused the request (the identity may not publish to the engines' list_sandboxes subjects)"
	if f := (*messages.ForbiddenError)(nil); errors.As(err, &f) && f.Reason != "" {
		why = "the engine refused it: " + f.Reason
	}
	fix := "run the console as an identity the engines let list sandboxes: an operator, or a tenant of an engine with tenancy, " +
		"which lists the tenant's own scopes (with --scope naming one of them, or none)"
	if c.o.scope != "" {
		fix = fmt.Sprintf("--scope %q may not be one of this identity's scopes: give one that is, or none (a tenant then sees all of its own)", c.o.scope)
	}
	return "No sandboxes can be listed: " + why + ". To see them, " + fix + "."
}
