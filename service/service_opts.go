package service

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// Option configures a [Service]. Nil options are skipped; the first error stops
// construction.
type Option func(*options) error

type options struct {
	logger          *zap.Logger
	prefix          string
	engineID        string
	version         string
	reaper          Reaper
	maxInFlight     int
	maxPerAccount   int // admission.go; 0: the default, with tenancy
	maxRequestBytes int
	chunkSize       int
	maxFileBytes    int64
	transferMemory  int64
	transferTTL     time.Duration
	fingerprints    *fingerprints      // fingerprint.go; nil: the call is refused as unsupported
	eventStats      EventStats         // health.go; nil: health reports no events
	daemonProbe     time.Duration      // report.go: how often the daemon is asked, for its transitions; 0: only on health calls
	placement       *placement.Store   // placement.go; nil: no cluster placement
	members         *placement.Members // members.go; nil: no announcement
	daemon          string
	metrics         *telemetry.Metrics   // nil: no metrics
	tracer          trace.TracerProvider // nil: no spans
	tenancy         *tenancy             // tenancy.go; nil: one tenant, every caller served as before
}

// MaxFileBytes is the largest file a transfer carries in either direction: 64 MiB.
const MaxFileBytes = 64 * sandbox.MiB

func defaultOptions() options {
	return options{
		logger:         zap.NewNop(),
		prefix:         messages.DefaultPrefix,
		version:        "0.0.0-dev",
		maxInFlight:    DefaultMaxInFlight,
		maxFileBytes:   MaxFileBytes,
		transferMemory: 512 * sandbox.MiB,
		transferTTL:    2 * time.Minute,
		daemonProbe:    DefaultDaemonProbe,
	}
}

var (
	semverRE  = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	errOption = func(format string, a ...any) error {
		return &sandbox.InvalidArgumentError{Reason: "service: " + fmt.Sprintf(format, a...)}
	}
)

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithPrefix sets the subject prefix (default [messages.DefaultPrefix]): dot-separated tokens of
// letters, digits, '-' and '_'. Engines sharing a prefix form one pool.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if !messages.ValidPrefix(prefix) {
			return errOption("prefix %q is not dot-separated NATS tokens", prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// settle checks the options that depend on each other: the placement store's engine ID
// against WithEngineID; the per-account bound, which only tenancy gives an account to.
func (o *options) settle() error {
	switch {
	case o.tenancy == nil:
		o.maxPerAccount = 0 // one tenant: the engine's bound is its bound
	case o.maxPerAccount == 0:
		o.maxPerAccount = DefaultMaxInFlightPerAccount(o.maxInFlight)
	}
	if p := o.placement; p != nil {
		switch o.engineID {
		case "":
			o.engineID = p.Engine()
		case p.Engine():
		default:
			return errOption("the placement store claims for engine %q, not this engine %q", p.Engine(), o.engineID)
		}
	}
	return nil
}

// WithTenancy makes the engine serve several tenants (tenancy.go, docs/operations.md#tenancy):
// every request must carry the caller's identity as the NATS server set it on the import
// crossing, and t decides which scopes, handles and subjects that identity may use; anything
// else is refused with a [*messages.ForbiddenError]. A nil t is [DefaultTenancy]. With
// [WithPlacement] or [WithMembers] a call forwarded to another engine carries the caller's
// identity in [ForwardedIdentityHeader], and the other engine checks it there; every engine
// of the pool should have the same t.
func WithTenancy(t *Tenancy) Option {
	return func(o *options) error {
		if t == nil {
			t = DefaultTenancy()
		}
		c, err := compileTenancy(t)
		if err != nil {
			return err
		}
		o.tenancy = c
		return nil
	}
}

// WithEngineID names this engine on its per-engine subjects (default: a random ID, new at
// every start, so handles never outlive the process that made them). One to 64 letters,
// digits, '-' or '_'.
func WithEngineID(id string) Option {
	return func(o *options) error {
		if !messages.ValidToken(id) {
			return errOption("engine ID %q must be 1-64 letters, digits, '-' or '_'", id)
		}
		o.engineID = id
		return nil
	}
}

// WithVersion sets the version the micro service and health replies report (default
// 0.0.0-dev). It must be a semantic version; a leading "v" is dropped.
func WithVersion(v string) Option {
	return func(o *options) error {
		v = strings.TrimPrefix(v, "v")
		if !semverRE.MatchString(v) {
			return errOption("version %q is not a semantic version", v)
		}
		o.version = v
		return nil
	}
}

// WithReaper serves reap requests with r (default: none, and a reap request fails with an
// [*sandbox.UnsupportedError]).
func WithReaper(r Reaper) Option {
	return func(o *options) error { o.reaper = r; return nil }
}

// DefaultMaxInFlight is the engine's bound on calls in flight.
const DefaultMaxInFlight = 256

// WithMaxInFlight bounds the requests handled at once (default [DefaultMaxInFlight]); a
// request over the bound is answered at once with a [*messages.EngineUnavailableError], and
// did not run. Health calls have a bound of their own of the same size: they never wait
// behind the others (admission.go).
func WithMaxInFlight(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return errOption("max in flight must be positive, got %d", n)
		}
		o.maxInFlight = n
		return nil
	}
}

// DefaultMaxInFlightPerAccount is an account's bound on an engine with tenancy when
// [WithMaxInFlightPerAccount] gives none: a quarter of the engine's (at least 1), so one
// tenant flooding the engine leaves three quarters of it to the others.
func DefaultMaxInFlightPerAccount(maxInFlight int) int { return max(1, maxInFlight/4) }

// WithMaxInFlightPerAccount bounds, on an engine with tenancy ([WithTenancy]), the requests
// of one NATS account handled at once (default [DefaultMaxInFlightPerAccount]); a request
// over its account's bound is answered at once with a [*messages.BusyError] and did not run,
// while other accounts are served. The account's health calls are bounded apart from its
// other calls. Without tenancy there is no account and only [WithMaxInFlight] bounds.
func WithMaxInFlightPerAccount(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return errOption("max in flight per account must be positive, got %d", n)
		}
		o.maxPerAccount = n
		return nil
	}
}

// WithMaxRequestBytes refuses requests larger than n bytes with a [*BadRequestError]
// (default: the connection's max payload).
func WithMaxRequestBytes(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return errOption("max request bytes must be positive, got %d", n)
		}
		o.maxRequestBytes = n
		return nil
	}
}

// WithChunkSize sets the raw bytes of one transfer chunk and the largest payload returned
// inline (default: what fits in one message of the connection's max payload once base64
// encoded, less room for the envelope).
func WithChunkSize(n int) Option {
	return func(o *options) error {
		if n < 1024 {
			return errOption("chunk size must be at least 1024, got %d", n)
		}
		o.chunkSize = n
		return nil
	}
}

// WithMaxFileBytes lowers the largest file a transfer carries (default and ceiling
// [MaxFileBytes]).
func WithMaxFileBytes(n int64) Option {
	return func(o *options) error {
		if n <= 0 || n > MaxFileBytes {
			return errOption("max file bytes must be in (0, %d], got %d", int64(MaxFileBytes), n)
		}
		o.maxFileBytes = n
		return nil
	}
}

// WithTransfers bounds the bytes held for uploads and downloads in progress (default
// 512 MiB) and how long an idle one is kept (default 2 minutes).
func WithTransfers(memory int64, ttl time.Duration) Option {
	return func(o *options) error {
		if memory <= 0 || ttl <= 0 {
			return errOption("transfer memory and ttl must be positive, got %d and %s", memory, ttl)
		}
		o.transferMemory, o.transferTTL = memory, ttl
		return nil
	}
}

// EventStats is what health reports of the engine's events: [events.Events] has it.
type EventStats interface {
	Stats() events.OutboxStats
}

// WithEventStats makes health report the events' outboxes (messages.APIEventsHealth): what
// they hold, what a stream refuses to store, what they dropped; nil, the default, reports
// none.
func WithEventStats(s EventStats) Option {
	return func(o *options) error {
		o.eventStats = s
		return nil
	}
}

// DefaultDaemonProbe is how often an engine whose router has an observer asks its daemon
// whether it answers, so that the daemon going away and coming back are acts it reports.
const DefaultDaemonProbe = 15 * time.Second

// WithDaemonProbe sets how often the daemon is asked (default [DefaultDaemonProbe]; zero asks
// only when a health call does). Only an engine whose router has an observer asks: the answer
// is reported as the engine's state (daemon_unreachable, daemon_back).
func WithDaemonProbe(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("daemon probe period %s is negative", d)}
		}
		o.daemonProbe = d
		return nil
	}
}

// WithMetrics records every call (its duration and refusal code), the sandboxes held by kind
// and the placement leases held into m; nil, the default, records nothing. The engine's acts
// (acquires, commands, lease changes) m counts as the router's observer, as the events do.
func WithMetrics(m *telemetry.Metrics) Option {
	return func(o *options) error {
		o.metrics = m
		return nil
	}
}

// WithTracerProvider starts a server span per call from tp, child of the request's
// traceparent when it carries one; the driver's daemon calls made for it are its children
// when the driver has the same provider. nil, the default, starts none.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		o.tracer = tp
		return nil
	}
}
