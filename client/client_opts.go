package client

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Option configures a [Backend]. Nil options are skipped; the first error stops
// construction.
type Option func(*options) error

type options struct {
	logger      *zap.Logger
	prefix      string
	engine      string
	callTimeout time.Duration
	retryWait   time.Duration
	liveness    time.Duration
	dropRetry   time.Duration // retry.go
	// reconnectGrace: retry.go
	reconnectGrace time.Duration
	placement      Placement // placement.go; nil: the client's own memory
	streamPrefix   string    // transfer.go: "" streams an exec to a fresh inbox
	noDeclarations bool      // operator.go: New reads nothing; Acquire refused
}

func defaultOptions() options {
	return options{
		logger:         zap.NewNop(),
		prefix:         messages.DefaultPrefix,
		callTimeout:    5 * time.Minute,
		retryWait:      30 * time.Second,
		liveness:       2 * time.Second,
		dropRetry:      10 * time.Second,
		reconnectGrace: time.Second,
	}
}

func errOption(format string, a ...any) error {
	return &sandbox.InvalidArgumentError{Reason: "client: " + fmt.Sprintf(format, a...)}
}

// WithStreamPrefix makes a streaming exec's chunks arrive on prefix.<unique token> instead of
// a fresh inbox: on an engine with tenancy an exec may stream only under the caller's own
// stream namespace, maf.sandbox.stream.<account> by default, which the engine's account
// exports to that account (docs/operations.md#tenancy).
func WithStreamPrefix(prefix string) Option {
	return func(o *options) error {
		if !messages.ValidPrefix(prefix) {
			return errOption("stream prefix %q is not dot-separated NATS tokens", prefix)
		}
		o.streamPrefix = prefix
		return nil
	}
}

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithPrefix sets the subject prefix of the engine pool to talk to (default
// [messages.DefaultPrefix]).
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if !messages.ValidPrefix(prefix) {
			return errOption("prefix %q is not dot-separated NATS tokens", prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithEngine sends every call, cold ones included, to the engine of this ID instead of the
// pool's shared subjects (default: the pool).
func WithEngine(id string) Option {
	return func(o *options) error {
		if !messages.ValidToken(id) {
			return errOption("engine ID %q must be 1-64 letters, digits, '-' or '_'", id)
		}
		o.engine = id
		return nil
	}
}

// WithCallTimeout bounds a call whose ctx has no deadline (default 5 minutes); an exec or
// reclaim gets its own timeout on top. No call waits without a bound.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return errOption("call timeout must be positive, got %s", d)
		}
		o.callTimeout = d
		return nil
	}
}

// WithRetryWait bounds how long a call keeps retrying while no engine can take it (none
// subscribed, or the one that answered is at its limit) before it fails with a
// [*messages.EngineUnavailableError] (default 30 s). A call addressed to one sandbox is not
// retried when its engine is gone: that sandbox went with it.
func WithRetryWait(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errOption("retry wait must not be negative, got %s", d)
		}
		o.retryWait = d
		return nil
	}
}

// WithLivenessInterval sets how often a call waiting on one engine asks whether that engine
// still runs (default 2 s; 0 never asks). When nobody answers, the engine died (or is between
// two NATS nodes) with the call in flight; when it answers with a connection younger than the
// call, the request or reply may have gone with its old one. Either way the call stops waiting
// out its timeout: one safe to repeat is sent again ([WithDropRetry]), any other fails with an
// [*OutcomeUnknownError] (wrapping an [*messages.EngineUnavailableError] for an engine that did
// not answer). A draining engine still answers until its last call has replied.
func WithLivenessInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errOption("liveness interval must not be negative, got %s", d)
		}
		o.liveness = d
		return nil
	}
}
