package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// call is one request: where it goes, what it carries and what it expects back.
type call struct {
	subject  string
	env      *messages.APIEnvelope // the request's envelope, whose wait_ms call sets
	req      any
	resp     any    // pointer to the response struct
	respType string // the response type the engine must answer with
	extra    time.Duration
	// pinned marks a call addressed to one engine: when nobody answers its subject, that
	// engine is gone and the call is not retried.
	pinned bool
	// engine is the engine a pinned call waits on, whose alive subject is asked while the
	// call is in flight.
	engine string
	// repeatable marks a call safe to repeat after a connection drop (retry.go).
	repeatable bool
}

// do sends c and decodes its reply, retrying while no engine can take it and, for a call
// that is safe to repeat, after a connection drop cut an attempt off (retry.go). Without a
// ctx deadline the call is bounded by the call timeout plus c.extra (an exec's own timeout).
func (b *Backend) do(ctx context.Context, c call) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.o.callTimeout+c.extra)
		defer cancel()
	}
	if id, _ := ctx.Value(requestIDKey{}).(string); id == "" {
		// Every attempt of one call carries one request ID, so the engine's log lines and audit
		// events of a call repeated after a drop join under it (docs/events.md).
		ctx = ContextWithRequestID(ctx, nuid.Next())
	}
	exp := backoff.NewExponentialBackOff()
	exp.InitialInterval = 50 * time.Millisecond
	exp.MaxInterval = time.Second
	exp.MaxElapsedTime = 0 // the closure decides, by what went wrong
	start := time.Now()
	var dropped time.Time // when an attempt of this call was first cut off by a drop
	attempt := 0
	return backoff.Retry(func() error {
		attempt++
		err := b.once(ctx, c)
		if err == nil {
			return nil
		}
		var drop *droppedError
		if errors.As(err, &drop) {
			if !c.repeatable {
				return backoff.Permanent(&OutcomeUnknownError{Subject: c.subject, Reason: drop.reason, Err: drop.err})
			}
			if dropped.IsZero() {
				dropped = time.Now()
			}
			err = &messages.EngineUnavailableError{Subject: c.subject, Reason: drop.reason + "; repeating the call did not get an answer"}
		}
		if ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		var ue *messages.EngineUnavailableError
		switch {
		case !dropped.IsZero() && time.Since(dropped) < b.o.dropRetry && errors.As(err, &ue):
			// The engine may still be reconnecting to another node: nobody answers it for a moment.
		case c.pinned && errors.Is(err, errNoResponders) && time.Since(start) < b.o.reconnectGrace:
			// Nothing was delivered, so any call may be sent again; the engine may be between
			// two nodes of the cluster.
		case retryable(err, c.pinned) && time.Since(start) < b.o.retryWait:
		default:
			return backoff.Permanent(err)
		}
		b.log.Debug("retry call", zap.String("subject", c.subject), zap.Int("attempt", attempt), zap.Error(err))
		return err
	}, backoff.WithContext(exp, ctx))
}

// retryable is the one classifier of the client: only an engine that did not take the
// call is worth asking again, and a pinned call's engine being gone is final.
func retryable(err error, pinned bool) bool {
	var ue *messages.EngineUnavailableError
	if !errors.As(err, &ue) {
		return false
	}
	var re *messages.RemoteError
	fromEngine := errors.As(err, &re) // busy or stopping: the engine answered
	return fromEngine || !pinned
}

// once sends c once.
func (b *Backend) once(ctx context.Context, c call) error {
	if dl, ok := ctx.Deadline(); ok && c.env != nil {
		c.env.WaitMS = max(time.Until(dl).Milliseconds(), 1)
	}
	data, err := json.Marshal(c.req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	msg, err := b.request(ctx, c, data)
	var drop *droppedError
	switch {
	case errors.As(err, &drop):
		return err
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w%w", &messages.EngineUnavailableError{Subject: c.subject, Reason: "no engine answers this subject"}, noResponders{})
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("request %s: %w", c.subject, err)
	case err != nil:
		return fmt.Errorf("request %s: %w", c.subject, err)
	}
	var head messages.APIResponse
	if err := json.Unmarshal(msg.Data, &head); err != nil {
		return &sandbox.ProtocolError{Backend: b.name, Reason: fmt.Sprintf("the engine's reply on %s is not JSON: %v", c.subject, err)}
	}
	if head.Error != nil {
		err := messages.DecodeError(head.Error)
		var intr *messages.InterruptedError
		if errors.As(err, &intr) {
			// The engine took the call and stopped it unfinished (its lease ended): a drop
			// that the engine reports, so the drop rule decides what happens next.
			return &droppedError{reason: intr.Reason, err: err}
		}
		return err
	}
	if head.Type != c.respType {
		return &sandbox.ProtocolError{Backend: b.name, Reason: fmt.Sprintf("the engine answered %s with type %q, want %q", c.subject, head.Type, c.respType)}
	}
	if err := json.Unmarshal(msg.Data, c.resp); err != nil {
		return &sandbox.ProtocolError{Backend: b.name, Reason: fmt.Sprintf("decode the %s reply: %v", c.respType, err)}
	}
	return nil
}

type requestIDKey struct{}

// ContextWithRequestID returns ctx carrying a request ID: every call made with it sends id in
// the [messages.RequestIDHeader] header, so the engine's replies, log lines and audit events carry
// it (an id that is not 1-128 visible ASCII characters is replaced by one the engine mints).
// Without one, each call mints its own, the same for all its attempts.
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// send sends data on subject with the ctx's request ID, if any, and the W3C traceparent of
// the span ctx carries, if any (so the engine's span of the call is its child), and waits for
// the reply.
func (b *Backend) send(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	if id, _ := ctx.Value(requestIDKey{}).(string); id != "" {
		m.Header.Set(messages.RequestIDHeader, id)
	}
	if sandbox.ActReason(ctx) == sandbox.ReasonOperator { // an operator's act: the console's
		m.Header.Set(messages.ReasonHeader, sandbox.ReasonOperator)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		tc := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, tc)
		m.Header.Set(messages.TraceparentHeader, tc.Get("traceparent"))
	}
	if len(m.Header) == 0 {
		m.Header = nil
	}
	return b.nc.RequestMsgWithContext(ctx, m)
}

// request sends data and waits for the reply. It abandons the attempt with a
// [*droppedError] when this client's connection drops meanwhile (the reply may be lost with
// it), and, every liveness interval: for a call waiting on one engine, when the engine's alive
// subject has nobody answering (the engine died, or is reconnecting) or reports a connection
// younger than the call (the request or the reply may have gone with the old one); for a call
// on a shared subject, when any engine of the pool reports a reconnect since the call was sent.
func (b *Backend) request(ctx context.Context, c call, data []byte) (*nats.Msg, error) {
	sent := time.Now()
	drops := b.nc.StatusChanged(nats.DISCONNECTED, nats.RECONNECTING)
	defer b.nc.RemoveStatusListener(drops)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	probe := b.o.liveness > 0
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		var tick <-chan time.Time
		if probe {
			t := time.NewTicker(b.o.liveness)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-drops:
				if ok {
					cancel(errClientDropped)
				}
				return
			case <-tick:
			}
			ask := b.probe
			if c.engine == "" {
				ask = b.probePool
			}
			if cause := ask(ctx, c.engine, time.Since(sent)); cause != nil {
				cancel(cause)
				return
			}
		}
	}()
	msg, err := b.send(ctx, c.subject, data)
	cancel(nil)
	<-watchDone
	if err == nil {
		return msg, nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(err, nats.ErrDisconnected): // nats.go fails the requests in flight when the connection drops
		return nil, &droppedError{reason: errClientDropped.Error()}
	case errors.Is(cause, errClientDropped), errors.Is(cause, errEngineReconnected):
		return nil, &droppedError{reason: cause.Error()}
	case errors.Is(cause, messages.ErrUnavailable):
		return nil, &droppedError{reason: cause.Error(), err: cause}
	}
	return nil, err
}

// probe asks engine's alive subject whether a call waiting for waited is still worth waiting
// for: nil when it is, else why not.
func (b *Backend) probe(ctx context.Context, engine string, waited time.Duration) error {
	alive := messages.Engine(messages.SubjectEngineAliveT, b.o.prefix, engine)
	pctx, cancel := context.WithTimeout(ctx, b.o.liveness)
	defer cancel()
	m, err := b.nc.RequestWithContext(pctx, alive, nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return &messages.EngineUnavailableError{Subject: alive, Reason: fmt.Sprintf(
			"engine %s stopped answering with the call in flight; whether it ran is unknown", engine)}
	}
	if err != nil {
		return nil // no answer in time says nothing: this client's connection may be what is slow
	}
	var r messages.AliveReply
	if json.Unmarshal(m.Data, &r) == nil && r.ConnectedMS != nil && time.Duration(*r.ConnectedMS)*time.Millisecond < waited {
		return errEngineReconnected
	}
	return nil
}

// probePool asks every engine of the pool ([messages.SubjectAlive]) whether one re-established its
// connection after a call on a shared subject that has waited for waited was sent: that engine
// may have taken the call and lost it. It collects answers for half a liveness interval.
func (b *Backend) probePool(ctx context.Context, _ string, waited time.Duration) error {
	inbox := b.nc.NewInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := b.nc.PublishRequest(messages.Shared(messages.SubjectAliveT, b.o.prefix), inbox, nil); err != nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, b.o.liveness/2)
	defer cancel()
	for {
		m, err := sub.NextMsgWithContext(pctx)
		if err != nil {
			return nil // no answer, or no more: nothing says the call was lost
		}
		var r messages.AliveReply
		if json.Unmarshal(m.Data, &r) == nil && r.ReconnectedMS != nil && time.Duration(*r.ReconnectedMS)*time.Millisecond < waited {
			return fmt.Errorf("%w (engine %s)", errEngineReconnected, r.Engine)
		}
	}
}
