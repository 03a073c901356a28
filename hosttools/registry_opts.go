package hosttools

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// DefaultMaxCallsPerRun is how many calls a run may make unless [WithMaxCallsPerRun] says
// otherwise.
const DefaultMaxCallsPerRun = 16

// Option configures a [Registry] built by [NewRegistry].
type Option func(*options) error

type options struct {
	requireDeclared bool
	allowed         []sandbox.ToolIdentity
	maxCalls        int
	limits          sandbox.TransferLimits
	logger          *zap.Logger
	quiet           bool
}

func defaultOptions() options {
	return options{allowed: []sandbox.ToolIdentity{sandbox.IdentityApp}, maxCalls: DefaultMaxCallsPerRun,
		limits: sandbox.DefaultTransferLimits(), logger: zap.NewNop()}
}

// WithRequireDeclared refuses undeclared tools at registration instead of serving them as an
// untrusted source acting as app.
func WithRequireDeclared() Option {
	return func(o *options) error { o.requireDeclared = true; return nil }
}

// WithAllowedIdentities sets the identities a registered tool may exercise (default {app});
// a tool declaring a nil identity is always allowed.
func WithAllowedIdentities(ids ...sandbox.ToolIdentity) Option {
	return func(o *options) error {
		for _, id := range ids {
			if _, err := sandbox.ParseToolIdentity(string(id)); err != nil {
				return err
			}
		}
		o.allowed = slices.Clone(ids)
		return nil
	}
}

// WithMaxCallsPerRun sets how many calls one run may make, refusals included; at least 1.
func WithMaxCallsPerRun(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
				"max calls per run must be at least 1, not %d: a host that wants no calls wants an empty registry", n)}
		}
		o.maxCalls = n
		return nil
	}
}

// WithResponseLimits bounds a run's responses: MaxBytesPerFile one response, MaxTotalBytes
// the run, MaxFiles the delivered responses. Every leg must be at least 1.
func WithResponseLimits(l sandbox.TransferLimits) Option {
	return func(o *options) error {
		if l.MaxBytesPerFile < 1 || l.MaxTotalBytes < 1 || l.MaxFiles < 1 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf(
				"response limits %s: every leg must be at least 1, or no response could be delivered", l)}
		}
		o.limits = l
		return nil
	}
}

// WithLogger sets the logger tool failures and the registration warning go to (default
// zap.NewNop()).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithoutRegistrationWarning suppresses the one-time warning the first registration logs.
func WithoutRegistrationWarning() Option {
	return func(o *options) error { o.quiet = true; return nil }
}
