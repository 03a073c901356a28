package service

import (
	"context"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/telemetry"
)

// Correlation headers. A request may carry [messages.RequestIDHeader] (the engine mints an ID when
// it does not, or when the value is not 1-128 visible ASCII characters) and a W3C
// [messages.TraceparentHeader]. Every reply carries the call's request ID in [messages.RequestIDHeader]
// and echoes a valid traceparent unchanged; exec chunks carry both too. The engine logs every
// line of a call with request_id (and trace_id when a traceparent came).
var (
	requestIDRE   = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
	traceparentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)
)

// call is one request being answered: what it asked, when it came, how to correlate it.
type call struct {
	op          operation
	ep          *endpoint
	msg         *nats.Msg
	start       time.Time
	requestID   string
	traceparent string          // "" unless the request carried a valid one
	log         *zap.Logger     // carries op, subject, request_id, and once read the key and handle
	ctx         context.Context // the engine's life with the call's span, child of the caller's traceparent
	span        trace.Span      // ended by reply
	identity    *Identity       // tenancy.go: the caller, on an engine with tenancy; else nil
	account     string          // admission.go: the account the call counts against
	forwarded   any             // forward.go: the answer of the engine a call was forwarded to
}

// callerAccount is the account the caller acquired under, on an engine with tenancy; "" else.
func (c *call) callerAccount() string {
	if c == nil || c.identity == nil {
		return ""
	}
	return c.identity.Account
}

// newCall reads m's correlation headers and derives the call's logger.
func (s *Service) newCall(m *nats.Msg, ep *endpoint, op operation) *call {
	c := &call{op: op, ep: ep, msg: m, start: time.Now()}
	var given string
	if m.Header != nil {
		given = m.Header.Get(messages.RequestIDHeader)
		if tp := m.Header.Get(messages.TraceparentHeader); validTraceparent(tp) {
			c.traceparent = tp
		}
	}
	c.requestID = given
	if !requestIDRE.MatchString(given) {
		c.requestID = nuid.Next()
	}
	fields := []zap.Field{zap.String("op", op.name), zap.String("subject", m.Subject), zap.String("request_id", c.requestID)}
	if c.traceparent != "" {
		fields = append(fields, zap.String("trace_id", traceparentRE.FindStringSubmatch(c.traceparent)[2]))
	}
	c.log = s.log.With(fields...)
	parent := s.life
	if c.traceparent != "" {
		parent = telemetry.TraceContext().Extract(parent, propagation.MapCarrier{"traceparent": c.traceparent})
	}
	c.ctx, c.span = s.tracer.Start(parent, op.name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(telemetry.KeyRPCSystem.String("nats"), telemetry.KeyRPCMethod.String(op.name)))
	if given != "" && given != c.requestID {
		c.log.Debug("request ID header refused; minted one", zap.Int("length", len(given)))
	}
	return c
}

// validTraceparent reports whether tp is a W3C traceparent the engine echoes: version not
// ff, trace and parent IDs not all zero.
func validTraceparent(tp string) bool {
	m := traceparentRE.FindStringSubmatch(tp)
	return m != nil && m[1] != "ff" && m[2] != "00000000000000000000000000000000" && m[3] != "0000000000000000"
}

// headers are the correlation headers of the call's reply and chunks.
func (c *call) headers() nats.Header {
	h := nats.Header{}
	h.Set(messages.RequestIDHeader, c.requestID)
	if c.traceparent != "" {
		h.Set(messages.TraceparentHeader, c.traceparent)
	}
	return h
}

type callKey struct{}

// withCall hands c to the operation through its context.
func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callOf returns the call ctx belongs to, or nil for a context no request made.
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}
