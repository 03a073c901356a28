package reaper

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// DefaultCallTimeout bounds each engine call of a sweep when [WithCallTimeout] is not given.
const DefaultCallTimeout = 60 * time.Second

// Option configures one [Reap] call. Nil options are skipped; the first error is returned.
type Option func(*options) error

type options struct {
	scope       string
	dryRun      bool
	drainer     Drainer
	callTimeout time.Duration
	now         func() time.Time
	log         *zap.Logger
}

func defaultOptions() options {
	return options{callTimeout: DefaultCallTimeout, now: time.Now, log: zap.NewNop()}
}

// WithScope narrows the sweep to one scope: the listing filters on the label
// maf-sandbox.scope = label.Value(scope), and every inspected container and network is
// checked again for that value. An empty scope is refused with [ErrInvalid]; without this
// option the sweep covers every scope on the engine.
func WithScope(scope string) Option {
	return func(o *options) error {
		if scope == "" {
			return fmt.Errorf("%w: empty scope", ErrInvalid)
		}
		o.scope = scope
		return nil
	}
}

// WithDryRun takes the inventory, decides and revalidates as a real sweep does, and removes
// nothing: [sandbox.ReapResult.Resources] says what a sweep would have removed.
func WithDryRun() Option {
	return func(o *options) error {
		o.dryRun = true
		return nil
	}
}

// WithDrainer drains every proxy right before its removal (§4.8). Without it proxies are
// removed by ID without a drain and nothing is published.
func WithDrainer(d Drainer) Option {
	return func(o *options) error {
		o.drainer = d
		return nil
	}
}

// WithCallTimeout bounds each engine call of the sweep (default [DefaultCallTimeout]), so a
// hung daemon cannot stall it. A call that outlives it fails with code timeout.
func WithCallTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: call timeout %s", ErrInvalid, d)
		}
		o.callTimeout = d
		return nil
	}
}

// WithLogger logs the sweep to l (default: nothing).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.log = l
		}
		return nil
	}
}

// withClock replaces the clock read once per sweep (tests).
func withClock(now func() time.Time) Option {
	return func(o *options) error {
		o.now = now
		return nil
	}
}
