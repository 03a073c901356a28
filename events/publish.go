package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Streams and their defaults (§3.7).
const (
	// StreamEgress holds egress windows: subjects <prefix>.egress.>.
	StreamEgress = "MAF_SANDBOX_EGRESS"
	// StreamOps holds operational records (reap summaries): subjects <prefix>.reap.>.
	StreamOps = "MAF_SANDBOX_OPS"
	// DefaultDuplicateWindow is both streams' duplicate window: it must exceed the spread
	// between overlapping drains of one proxy.
	DefaultDuplicateWindow = 15 * time.Minute
	// DefaultEgressMaxAge is how long the egress stream keeps a window.
	DefaultEgressMaxAge = 30 * 24 * time.Hour
)

// Publisher sends one [Message]. Publish makes one attempt and returns once the
// message is known to be accepted (for JetStream: the PubAck, duplicates included) or has
// failed; it never retries — an [Outbox] does. Retrying a message with the same ID is always
// safe.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// natsMsg renders m with the headers every event carries.
func natsMsg(m Message) *nats.Msg {
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	msg.Header.Set(HeaderMsgID, m.ID)
	msg.Header.Set(HeaderEventType, m.Type)
	msg.Header.Set(HeaderContentType, "application/json")
	return msg
}

// CorePublisher publishes on core NATS: at most once per attempt, no acknowledgement beyond
// the server having read the message (a flush), no duplicate suppression (subscribers
// de-duplicate on the event ID).
type CorePublisher struct {
	nc *nats.Conn
}

// NewCorePublisher publishes over nc, which the caller owns and closes.
func NewCorePublisher(nc *nats.Conn) *CorePublisher { return &CorePublisher{nc: nc} }

// Publish implements [Publisher]: [ErrNotConnected] while nc is not connected (the client
// would otherwise buffer the message and report success), else the flush's error.
func (p *CorePublisher) Publish(ctx context.Context, m Message) error {
	if !p.nc.IsConnected() {
		return fmt.Errorf("%w: publish %s (%s)", ErrNotConnected, m.Subject, p.nc.Status())
	}
	if err := p.nc.PublishMsg(natsMsg(m)); err != nil {
		return fmt.Errorf("events: publish %s: %w", m.Subject, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if err := p.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("events: publish %s: flush: %w", m.Subject, err)
	}
	return nil
}

// JetStreamPublisher publishes to the streams of §3.7 and waits for each PubAck. The event ID
// travels as Nats-Msg-Id, so a repeat inside the duplicate window is acknowledged as a
// duplicate and not stored twice. The streams are created (or updated) before the first
// publish, and again after a publish finds no stream.
type JetStreamPublisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	maxAge  time.Duration
	audit   time.Duration
	dupes   time.Duration
	mu      sync.Mutex
	ensured bool
}

// JetStreamOpt configures a [JetStreamPublisher].
type JetStreamOpt func(*JetStreamPublisher) error

// WithSubjectPrefix sets the subject prefix the streams bind (default
// [DefaultSubjectPrefix]). It must be the prefix the messages are built with; one
// that [CheckSubjectPrefix] refuses is refused here too.
func WithSubjectPrefix(prefix string) JetStreamOpt {
	return func(p *JetStreamPublisher) error {
		if err := CheckSubjectPrefix(prefix); err != nil {
			return err
		}
		p.prefix = prefix
		return nil
	}
}

// WithEgressMaxAge sets how long the egress stream keeps windows (default
// [DefaultEgressMaxAge]).
func WithEgressMaxAge(d time.Duration) JetStreamOpt {
	return func(p *JetStreamPublisher) error {
		if d <= 0 {
			return fmt.Errorf("%w: max age %s", ErrInvalidEvent, d)
		}
		p.maxAge = d
		return nil
	}
}

// WithAuditMaxAge sets how long the audit stream keeps events (default [DefaultAuditMaxAge]).
func WithAuditMaxAge(d time.Duration) JetStreamOpt {
	return func(p *JetStreamPublisher) error {
		if d <= 0 {
			return fmt.Errorf("%w: audit max age %s", ErrInvalidEvent, d)
		}
		p.audit = d
		return nil
	}
}

// WithDuplicateWindow sets the streams' duplicate window (default [DefaultDuplicateWindow]).
func WithDuplicateWindow(d time.Duration) JetStreamOpt {
	return func(p *JetStreamPublisher) error {
		if d <= 0 {
			return fmt.Errorf("%w: duplicate window %s", ErrInvalidEvent, d)
		}
		p.dupes = d
		return nil
	}
}

// NewJetStreamPublisher publishes over nc, which the caller owns and closes. It makes no call
// to the server.
func NewJetStreamPublisher(nc *nats.Conn, opts ...JetStreamOpt) (*JetStreamPublisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: new jetstream publisher: %w", err)
	}
	p := &JetStreamPublisher{nc: nc, js: js, prefix: DefaultSubjectPrefix, maxAge: DefaultEgressMaxAge, audit: DefaultAuditMaxAge, dupes: DefaultDuplicateWindow}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// StreamConfigs returns the stream configurations the publisher ensures.
func (p *JetStreamPublisher) StreamConfigs() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name: StreamEgress, Description: "maf-sandbox egress windows (" + SchemaEgressObserved + ")",
			Subjects: []string{p.prefix + ".egress.>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
			MaxAge: p.maxAge, Duplicates: p.dupes,
		},
		{
			Name: StreamOps, Description: "maf-sandbox operational records (" + SchemaReapCompleted + ")",
			Subjects: []string{p.prefix + ".reap.>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
			Duplicates: p.dupes,
		},
		{
			Name: StreamAudit, Description: "maf-sandbox audit stream (" + SchemaAudit + ")",
			Subjects: []string{p.prefix + ".audit.>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
			MaxAge: p.audit, Duplicates: p.dupes,
		},
	}
}

// EnsureStreams creates or updates the streams.
func (p *JetStreamPublisher) EnsureStreams(ctx context.Context) error {
	if err := p.ensureStreams(ctx); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

func (p *JetStreamPublisher) ensureStreams(ctx context.Context) error {
	for _, cfg := range p.StreamConfigs() {
		if _, err := p.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	p.mu.Lock()
	p.ensured = true
	p.mu.Unlock()
	return nil
}

// Publish implements [Publisher]: [ErrNotConnected] while nc is not connected, else the
// stream's acknowledgement or its error. A duplicate acknowledgement is success.
func (p *JetStreamPublisher) Publish(ctx context.Context, m Message) error {
	if !p.nc.IsConnected() {
		return fmt.Errorf("%w: publish %s (%s)", ErrNotConnected, m.Subject, p.nc.Status())
	}
	p.mu.Lock()
	ensured := p.ensured
	p.mu.Unlock()
	if !ensured {
		if err := p.ensureStreams(ctx); err != nil {
			return fmt.Errorf("events: publish %s: %w", m.Subject, err)
		}
	}
	if _, err := p.js.PublishMsg(ctx, natsMsg(m), jetstream.WithMsgID(m.ID)); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			p.mu.Lock()
			p.ensured = false
			p.mu.Unlock()
		}
		if streamRefuses(err) {
			return fmt.Errorf("events: publish %s: %w: %w", m.Subject, ErrStreamRefused, err)
		}
		return fmt.Errorf("events: publish %s: %w", m.Subject, err)
	}
	return nil
}

// The JetStream API errors with which a stream refuses a message it was sent: it failed to
// store it (its limits reached under the discard-new policy, or its store failing), or the
// server's JetStream resources are exhausted; or the message is larger than the stream's
// max_msg_size, which no retry of it changes.
const (
	jsErrStreamStoreFailed     jetstream.ErrorCode = 10077
	jsErrInsufficientResources jetstream.ErrorCode = 10023
	jsErrMessageOverStreamMax  jetstream.ErrorCode = 10054
)

// streamRefuses reports an answer of the stream that only an operator's act ends: the
// message is fine, the stream will not take it.
func streamRefuses(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jsErrStreamStoreFailed || apiErr.ErrorCode == jsErrInsufficientResources)
}

// permanentNATS are the client's answers that no retry of the same message can change.
var permanentNATS = []error{nats.ErrMaxPayload, nats.ErrBadSubject, nats.ErrInvalidMsg, nats.ErrHeadersNotSupported}

// overStreamMax reports a message larger than its stream takes: a refusal for good.
func overStreamMax(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrMessageOverStreamMax
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
