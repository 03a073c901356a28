package console

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Option configures a [Console].
type Option func(*options) error

type options struct {
	log         *zap.Logger
	prefix      string
	eventPrefix string
	identity    string
	scope       string
	window      int
	poll        time.Duration
	reconcile   time.Duration
	callTimeout time.Duration
}

// Defaults of the options.
const (
	DefaultWindow      = 2000
	DefaultPoll        = time.Second
	DefaultReconcile   = 15 * time.Second
	DefaultCallTimeout = 30 * time.Second
)

func defaultOptions() options {
	return options{log: zap.NewNop(), prefix: messages.DefaultPrefix, eventPrefix: events.DefaultSubjectPrefix,
		identity: "anonymous", window: DefaultWindow, poll: DefaultPoll, reconcile: DefaultReconcile, callTimeout: DefaultCallTimeout}
}

func errOption(format string, a ...any) error {
	return &sandbox.InvalidArgumentError{Reason: "console: " + fmt.Sprintf(format, a...)}
}

// WithLogger sets the logger (default none).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errOption("a nil logger")
		}
		o.log = l
		return nil
	}
}

// WithPrefix sets the API's subject prefix (default [messages.DefaultPrefix]).
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if !messages.ValidPrefix(prefix) {
			return errOption("invalid API prefix %q", prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithEventPrefix sets the events' subject prefix (default [events.DefaultSubjectPrefix]).
func WithEventPrefix(prefix string) Option {
	return func(o *options) error {
		if !messages.ValidPrefix(prefix) {
			return errOption("invalid event prefix %q", prefix)
		}
		o.eventPrefix = prefix
		return nil
	}
}

// WithScope narrows the console to one scope, a tenant's: it lists only that scope's
// sandboxes (list_sandboxes with scope, which an engine with tenancy requires of a
// non-operator) and subscribes only to that scope's audit and egress events.
func WithScope(scope string) Option {
	return func(o *options) error {
		if scope == "" {
			return errOption("an empty scope")
		}
		o.scope = scope
		return nil
	}
}

// WithIdentity names the NATS identity the console acts as, for the page to say (default
// "anonymous"). It decides nothing: the server's permissions do.
func WithIdentity(name string) Option {
	return func(o *options) error {
		if name == "" {
			return errOption("an empty identity")
		}
		o.identity = name
		return nil
	}
}

// WithWindow bounds each kind of event kept in memory: audit events, egress windows and reap
// summaries, n of each at most (default [DefaultWindow]).
func WithWindow(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return errOption("a window of %d events", n)
		}
		o.window = n
		return nil
	}
}

// WithPoll sets how often the engines are asked for their stats and health (default
// [DefaultPoll]) and how often every engine's sandboxes are listed again (default
// [DefaultReconcile]).
func WithPoll(poll, reconcile time.Duration) Option {
	return func(o *options) error {
		if poll <= 0 || reconcile <= 0 {
			return errOption("poll %s and reconcile %s must be positive", poll, reconcile)
		}
		o.poll, o.reconcile = poll, reconcile
		return nil
	}
}

// WithCallTimeout bounds each API call the console makes (default [DefaultCallTimeout]).
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return errOption("a call timeout of %s", d)
		}
		o.callTimeout = d
		return nil
	}
}
