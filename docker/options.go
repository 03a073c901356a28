package docker

import (
	"fmt"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/telemetry"
)

// options is what an [Option] sets, for either driver.
type options struct {
	log     *zap.Logger
	metrics *telemetry.Metrics
	tracer  trace.TracerProvider
}

// Option configures a driver ([NewEngine]).
type Option func(*options) error

// WithLogger sets the logger (default zap.NewNop()). Commands log at Debug, binding at Info.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("with logger: %w: nil logger", ErrInvalid)
		}
		o.log = l
		return nil
	}
}

// applyOptions starts from the defaults and applies opts in order, skipping nil ones and
// stopping at the first error.
func applyOptions(opts []Option) (options, error) {
	o := options{log: zap.NewNop()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// WithMetrics records every daemon call's operation and duration into m (nil, the default,
// records nothing).
func WithMetrics(m *telemetry.Metrics) Option {
	return func(o *options) error {
		o.metrics = m
		return nil
	}
}

// WithTracerProvider starts a client span per daemon call from tp, a child of the span the
// call's context carries (the API call's, when the service has the same provider); nil, the
// default, starts none.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.tracer = tp
		return nil
	}
}
