package fingerprint

import (
	"fmt"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/internal/observation"
	"github.com/mafsandbox/engine/sandbox"
)

// Defaults of the options.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultMaxOutputBytes = 16 << 20
)

// Option configures a [Subject].
type Option func(*options) error

type options struct {
	image     string
	limits    observation.Limits
	timeout   time.Duration
	maxOutput int64
	log       *zap.Logger
	base      string
	baseSet   bool
}

// WithObserverImage names the observer image; [New] needs it. The caller names it (the
// engine's build tag is internal/images.ObserverTag) so that this package, below the image
// builders, imports none of them. It is resolved to its ID once, by [New], and used by that
// ID only.
func WithObserverImage(ref string) Option {
	return func(o *options) error {
		if ref == "" || strings.HasPrefix(ref, "-") {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("fingerprint: observer image %q", ref)}
		}
		o.image = ref
		return nil
	}
}

// WithLimits bounds each observation: file bytes hashed and entries recorded (defaults
// [observation.DefaultMaxBytes], [observation.DefaultMaxEntries]). Going over either fails the
// fingerprint. The root filesystem's own bound, [observation.DefaultMaxRootEntries] entries
// stat'ed, is not changed here.
func WithLimits(maxBytes int64, maxEntries int) Option {
	return func(o *options) error {
		if maxBytes <= 0 || maxEntries <= 0 {
			return &sandbox.InvalidArgumentError{Reason: "fingerprint: observer limits must be positive"}
		}
		o.limits.MaxBytes, o.limits.MaxEntries = maxBytes, maxEntries
		return nil
	}
}

// WithTimeout bounds each observer run (default [DefaultTimeout]).
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return &sandbox.InvalidArgumentError{Reason: "fingerprint: the timeout must be positive"}
		}
		o.timeout = d
		return nil
	}
}

// WithStorageBase names the sandbox's storage base, an absolute guest path, which overrides
// the container's own WorkDir. The baseline accepts that directory and its ancestors already
// changed (see the package doc); "/" accepts nothing.
func WithStorageBase(dir string) Option {
	return func(o *options) error {
		if !path.IsAbs(dir) || strings.ContainsRune(dir, 0) {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("fingerprint: storage base %q is not an absolute path", dir)}
		}
		o.base, o.baseSet = path.Clean(dir), true
		return nil
	}
}

// WithLogger sets the logger (default none).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.log = l
		}
		return nil
	}
}

// parseOptions applies opts over the defaults and refuses a missing observer image.
func parseOptions(opts []Option) (options, error) {
	o := options{timeout: DefaultTimeout, maxOutput: DefaultMaxOutputBytes, log: zap.NewNop(),
		limits: observation.DefaultLimits()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.image == "" {
		return o, &sandbox.InvalidArgumentError{Reason: "fingerprint: no observer image (WithObserverImage)"}
	}
	return o, nil
}
