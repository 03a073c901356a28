package docker

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/telemetry"
)

// options is what an [Option] sets, for either driver.
type options struct {
	log     *zap.Logger
	metrics *telemetry.Metrics
}

// Option configures a [CLI] or an [API].
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
