package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Console watches an engine pool on one NATS connection and serves the operator's page
// ([Console.Handler]). Build it with [New] and stop it with [Console.Close]; the connection
// stays the caller's.
type Console struct {
	nc    *nats.Conn
	o     options
	log   *zap.Logger
	state *state
	subs  []*nats.Subscription

	mu      sync.Mutex
	actions map[string]string         // action → allowed, denied or unknown
	denials map[*denialWatch]struct{} // requests waiting on a permissions violation
	listed  map[string]time.Time      // engine → when its sandboxes were last listed
	silent  map[string]int            // engine → polls it did not answer

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// The actions the page offers, each one API operation.
const (
	ActionDispose  = "dispose"       // dispose on the shared subject: one exact instance
	ActionPurge    = "dispose_scope" // dispose_scope on the shared subject: a conversation
	ActionLameDuck = "lame_duck"     // lame_duck on an engine's own subject
)

// Action states, as the page shows them.
const (
	Allowed = "allowed" // an engine answered the probe
	Denied  = "denied"  // the server refused the publish: the identity lacks the permission
	Unknown = "unknown" // no engine answered yet; the action is offered, and NATS decides
)

// denialWatch waits for a permissions violation on one subject.
type denialWatch struct {
	subject string
	hit     chan struct{}
}

// New subscribes nc to the pool's events and starts watching its engines. It takes over
// nc's asynchronous error handler: that is where the server's permissions violations arrive.
// It fails with an [*sandbox.InvalidArgumentError] for a nil connection or a bad option, and
// with the client's error when a subscription cannot be made.
func New(nc *nats.Conn, opts ...Option) (*Console, error) {
	if nc == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "console: a NATS connection is required"}
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	c := &Console{nc: nc, o: o, log: o.log.With(zap.String("prefix", o.prefix)), state: newState(o.window),
		actions: map[string]string{ActionDispose: Unknown, ActionPurge: Unknown, ActionLameDuck: Unknown, ActionPause: Unknown, ActionSnapshot: Unknown}, denials: map[*denialWatch]struct{}{},
		listed: map[string]time.Time{}, silent: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	nc.SetErrorHandler(c.asyncError)
	scoped := ">" // every scope's events, or the one scope's: <prefix>.audit.<scope>.>
	if o.scope != "" {
		scoped = events.Token(o.scope) + ".>"
	}
	for subject, h := range map[string]nats.MsgHandler{
		o.eventPrefix + ".audit." + scoped:           c.onAudit,
		o.eventPrefix + ".egress.observed." + scoped: func(m *nats.Msg) { c.state.egressEvent(json.RawMessage(m.Data)) },
		o.eventPrefix + ".reap.completed":            func(m *nats.Msg) { c.state.reapEvent(json.RawMessage(m.Data)) },
	} {
		sub, err := nc.Subscribe(subject, h)
		if err != nil {
			c.unsubscribe()
			return nil, fmt.Errorf("subscribe to %s: %w", subject, err)
		}
		c.subs = append(c.subs, sub)
	}
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		c.unsubscribe()
		return nil, fmt.Errorf("flush subscriptions: %w", err)
	}
	go c.loop()
	return c, nil
}

// Close stops the polls and the subscriptions; browsers still connected are cut off.
func (c *Console) Close() error {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.unsubscribe()
		c.state.mu.Lock()
		for w := range c.state.hub.watchers {
			c.state.hub.remove(w)
		}
		c.state.mu.Unlock()
	})
	return nil
}

func (c *Console) unsubscribe() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
}

func (c *Console) onAudit(m *nats.Msg) {
	var ev events.AuditEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		c.log.Debug("undecodable audit event", zap.String("subject", m.Subject), zap.Error(err))
		return
	}
	c.state.auditEvent(json.RawMessage(m.Data), &ev)
}

// asyncError hears the server's asynchronous errors; a permissions violation names the
// subject it refused (the server's own wording, "Permissions Violation for Publish to
// "<subject>""), which is how a request that will never be answered learns why.
func (c *Console) asyncError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		c.log.Warn("nats error", zap.Error(err))
		return
	}
	c.log.Info("nats refused the console", zap.Error(err))
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.denials {
		if strings.Contains(err.Error(), `"`+w.subject+`"`) {
			delete(c.denials, w)
			close(w.hit)
		}
	}
}

// call sends req on subject and decodes the reply into resp: an API error becomes the wire
// error it encodes, a permissions violation or an engine's forbidden [ErrForbidden] (the
// latter still [messages.ForbiddenError] to errors.As), silence [ErrUnanswered].
func (c *Console) call(ctx context.Context, subject string, req, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.callTimeout)
	defer cancel()
	w := &denialWatch{subject: subject, hit: make(chan struct{})}
	c.mu.Lock()
	c.denials[w] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.denials, w)
		c.mu.Unlock()
	}()
	type result struct {
		msg *nats.Msg
		err error
	}
	got := make(chan result, 1)
	go func() {
		// Every act of the console is an operator's (lifecycle.go).
		msg, err := c.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: b,
			Header: nats.Header{messages.ReasonHeader: []string{sandbox.ReasonOperator}}})
		got <- result{msg, err}
	}()
	var r result
	select {
	case <-w.hit:
		return fmt.Errorf("%s: %w", subject, ErrForbidden)
	case r = <-got:
	}
	switch {
	case errors.Is(r.err, nats.ErrNoResponders), errors.Is(r.err, context.DeadlineExceeded), errors.Is(r.err, nats.ErrTimeout):
		select {
		case <-w.hit:
			return fmt.Errorf("%s: %w", subject, ErrForbidden)
		default:
		}
		return fmt.Errorf("%s: %w", subject, ErrUnanswered)
	case r.err != nil:
		return fmt.Errorf("request %s: %w", subject, r.err)
	}
	var head messages.APIResponse
	if err := json.Unmarshal(r.msg.Data, &head); err != nil {
		return fmt.Errorf("decode reply of %s: %w", subject, err)
	}
	if head.Error != nil {
		err := messages.DecodeError(head.Error)
		// An engine with tenancy refusing this identity is the same verdict for the console
		// as the NATS server's: the action is greyed and refused (403).
		if forbidden := (*messages.ForbiddenError)(nil); errors.As(err, &forbidden) {
			return fmt.Errorf("%s: %w: %w", subject, ErrForbidden, err)
		}
		return err
	}
	if err := json.Unmarshal(r.msg.Data, resp); err != nil {
		return fmt.Errorf("decode reply of %s: %w", subject, err)
	}
	return nil
}

// Sandboxes returns every sandbox the console shows now.
func (c *Console) Sandboxes() []messages.APISandboxEntry { return c.state.sandboxesNow() }

// Actions returns each action's state: [Allowed], [Denied] or [Unknown].
func (c *Console) Actions() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]string, len(c.actions))
	for k, v := range c.actions {
		out[k] = v
	}
	return out
}
