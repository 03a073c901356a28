package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Console watches an engine pool on one NATS connection and serves the operator's page
// ([Console.Handler]). Build it with [New] and stop it with [Console.Close]; the connection
// stays the caller's. Every call it makes of the pool goes through the project's Go client
// (package client), under the connection's identity.
type Console struct {
	nc     *nats.Conn
	remote *client.Backend // the calls: polls, probes and actions
	o      options
	log    *zap.Logger
	state  *state
	subs   []*nats.Subscription

	acting   sync.Mutex              // actions and probes run one at a time (action)
	mu       sync.Mutex              // guards the rest
	refusing context.CancelCauseFunc // ends the action in flight when the server refuses it
	actions  map[string]string       // action → allowed, denied or unknown
	listed   map[string]time.Time    // engine → when its sandboxes were last listed, or refused
	refused  map[string]bool         // engine → its last list_sandboxes was refused
	silent   map[string]int          // engine → polls it did not answer

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
	// The operator's client: it needs no engine up to be built, and never waits for one.
	remote, err := client.New(context.Background(), nc, client.WithPrefix(o.prefix), client.WithoutDeclarations(),
		client.WithLogger(o.log), client.WithCallTimeout(o.callTimeout), client.WithRetryWait(0))
	if err != nil {
		return nil, err
	}
	c := &Console{nc: nc, remote: remote, o: o, log: o.log.With(zap.String("prefix", o.prefix)), state: newState(o.window),
		actions: map[string]string{ActionDispose: Unknown, ActionPurge: Unknown, ActionLameDuck: Unknown, ActionPause: Unknown, ActionSnapshot: Unknown},
		listed:  map[string]time.Time{}, refused: map[string]bool{}, silent: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
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

// asyncError hears the server's asynchronous errors. A permissions violation — the server
// dropped a publish of this identity — ends the action in flight, refused ([ErrForbidden]):
// actions and probes run one at a time, and the polls ask only what a viewer may, so the
// violation is that action's. The violation's sentence (which names the subject) is logged,
// never read.
func (c *Console) asyncError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		c.log.Warn("nats error", zap.Error(err))
		return
	}
	c.log.Info("nats refused the console", zap.Error(err))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusing != nil {
		c.refusing(ErrForbidden)
	}
}

// action runs do, one action or probe at a time, and says how it ended: [ErrForbidden] when
// the NATS server refused the identity's publish or an engine's tenancy refused it (still a
// [*messages.ForbiddenError] to errors.As), [ErrUnanswered] when no engine answered, else
// do's own error.
func (c *Console) action(ctx context.Context, do func(context.Context) error) error {
	c.acting.Lock()
	defer c.acting.Unlock()
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	c.mu.Lock()
	c.refusing = refuse
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.refusing = nil
		c.mu.Unlock()
	}()
	err := do(ctx)
	var forbidden *messages.ForbiddenError
	switch {
	case err == nil:
		return nil
	case errors.Is(context.Cause(ctx), ErrForbidden):
		return ErrForbidden
	case errors.As(err, &forbidden):
		return fmt.Errorf("%w: %w", ErrForbidden, err)
	case errors.Is(err, messages.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrUnanswered, err)
	}
	return err
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
