package placement

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Option configures a [Store] or [Members]. Nil options are skipped; the first error stops
// construction.
type Option func(*options) error

type options struct {
	logger   *zap.Logger
	bucket   string
	replicas int
	lease    time.Duration
	grace    time.Duration
	daemon   string
}

// Default bucket names and lease.
const (
	DefaultBucket        = "maf-sandbox-placement"
	DefaultMembersBucket = "maf-sandbox-engines"
	DefaultLease         = 5 * time.Second
	DefaultGrace         = time.Second
)

func defaultOptions(bucket string) options {
	return options{logger: zap.NewNop(), bucket: bucket, replicas: 1, lease: DefaultLease, grace: DefaultGrace}
}

// buildOptions applies opts, nil ones skipped, over the defaults for bucket.
func buildOptions(bucket string, opts []Option) (options, error) {
	o := defaultOptions(bucket)
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return options{}, err
		}
	}
	return o, nil
}

func errOption(format string, a ...any) error {
	return &sandbox.InvalidArgumentError{Reason: "placement: " + fmt.Sprintf(format, a...)}
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

// WithBucket names the KV bucket (default [DefaultBucket] for a Store, [DefaultMembersBucket]
// for Members). Engine pools that must not see each other use different buckets.
func WithBucket(name string) Option {
	return func(o *options) error {
		if name == "" {
			return errOption("empty bucket name")
		}
		o.bucket = name
		return nil
	}
}

// WithReplicas sets the bucket's JetStream replicas when this call creates it (default 1; 3 on
// a 3-node cluster, so that placement survives a node).
func WithReplicas(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 5 {
			return errOption("replicas must be 1 to 5, got %d", n)
		}
		o.replicas = n
		return nil
	}
}

// WithLease sets how long a claim or renewal holds (default [DefaultLease]); for Members it is
// the bucket's TTL, how long an announcement counts.
func WithLease(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond {
			return errOption("lease must be at least 100ms, got %s", d)
		}
		o.lease = d
		return nil
	}
}

// WithGrace sets how long past a lease's recorded expiry another engine waits before taking it
// over (default [DefaultGrace]): the clock skew between hosts the leases tolerate.
func WithGrace(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errOption("grace must not be negative, got %s", d)
		}
		o.grace = d
		return nil
	}
}

// WithDaemon records the owner's Docker daemon identity in its entries, so that a taker can
// tell whether it reaches the same daemon and can adopt the container.
func WithDaemon(id string) Option {
	return func(o *options) error { o.daemon = id; return nil }
}
