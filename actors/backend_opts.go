package actors

import (
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
)

// Option configures a [Backend]. Nil options are skipped; the first error stops construction.
type Option func(*options) error

type options struct {
	logger     *zap.Logger
	engine     docker.Engine
	freezes    *Freezes
	askTimeout time.Duration
	watch      bool
	egress     egressOptions // egress.go
}

func defaultOptions() options {
	return options{logger: zap.NewNop(), askTimeout: 10 * time.Minute, watch: true}
}

// WithLogger sets the logger (default: none). protoactor's own logging is routed to it too.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithEngine replaces the engine seam (default: the Docker CLI driver built from the config).
func WithEngine(e docker.Engine) Option {
	return func(o *options) error { o.engine = e; return nil }
}

// WithFreezes shares a freeze record between backends of one process that reach the same
// daemon (default: the backend's own).
func WithFreezes(f *Freezes) Option {
	return func(o *options) error { o.freezes = f; return nil }
}

// WithAskTimeout bounds how long a call waits for its container actor beyond its own
// deadlines (default 10 minutes); it only guards against a lost reply.
func WithAskTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d > 0 {
			o.askTimeout = d
		}
		return nil
	}
}

// WithoutEventWatch turns off the engine event stream that keeps container state fresh
// between acquires; every acquire then inspects the container.
func WithoutEventWatch() Option {
	return func(o *options) error { o.watch = false; return nil }
}
