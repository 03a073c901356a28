package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/wire"
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
}

// do sends c and decodes its reply, retrying while no engine can take it. Without a ctx
// deadline the call is bounded by the call timeout plus c.extra (an exec's own timeout).
func (b *Backend) do(ctx context.Context, c call) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.o.callTimeout+c.extra)
		defer cancel()
	}
	var policy backoff.BackOff = &backoff.StopBackOff{}
	if b.o.retryWait > 0 {
		exp := backoff.NewExponentialBackOff()
		exp.InitialInterval = 50 * time.Millisecond
		exp.MaxInterval = time.Second
		exp.MaxElapsedTime = b.o.retryWait
		policy = exp
	}
	attempt := 0
	return backoff.Retry(func() error {
		attempt++
		err := b.once(ctx, c)
		if err != nil && retryable(err, c.pinned) && ctx.Err() == nil {
			b.log.Debug("retry call", zap.String("subject", c.subject), zap.Int("attempt", attempt), zap.Error(err))
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(policy, ctx))
}

// retryable is the one classifier of the client: only an engine that did not take the
// call is worth asking again, and a pinned call's engine being gone is final.
func retryable(err error, pinned bool) bool {
	var ue *wire.EngineUnavailableError
	if !errors.As(err, &ue) {
		return false
	}
	var re *wire.RemoteError
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
	msg, gone, err := b.request(ctx, c, data)
	switch {
	case gone:
		return &wire.EngineUnavailableError{Subject: c.subject, Reason: fmt.Sprintf(
			"engine %s stopped answering with the call in flight; whether it ran is unknown", c.engine)}
	case errors.Is(err, nats.ErrNoResponders):
		return &wire.EngineUnavailableError{Subject: c.subject, Reason: "no engine answers this subject"}
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
		return wire.DecodeError(head.Error)
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
// the [wire.RequestIDHeader] header, so the engine's replies and log lines carry it (an id
// that is not 1-128 visible ASCII characters is replaced by one the engine mints).
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// send sends data on subject with the ctx's request ID, if any, and waits for the reply.
func (b *Backend) send(ctx context.Context, subject string, data []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: subject, Data: data}
	if id, _ := ctx.Value(requestIDKey{}).(string); id != "" {
		m.Header = nats.Header{wire.RequestIDHeader: {id}}
	}
	return b.nc.RequestMsgWithContext(ctx, m)
}

// request sends data and waits for the reply. For a call waiting on one engine it asks the
// engine's alive subject every liveness interval, and gives up when nobody answers there:
// gone reports that.
func (b *Backend) request(ctx context.Context, c call, data []byte) (msg *nats.Msg, gone bool, err error) {
	if c.engine == "" || b.o.liveness <= 0 {
		msg, err = b.send(ctx, c.subject, data)
		return msg, false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var dead atomic.Bool
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		alive := wire.Engine(wire.SubjectEngineAliveT, b.o.prefix, c.engine)
		t := time.NewTicker(b.o.liveness)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, b.o.liveness)
			_, err := b.nc.RequestWithContext(pctx, alive, nil)
			pcancel()
			if errors.Is(err, nats.ErrNoResponders) {
				dead.Store(true)
				cancel()
				return
			}
		}
	}()
	msg, err = b.send(ctx, c.subject, data)
	cancel()
	<-probeDone
	if err != nil && dead.Load() {
		return nil, true, err
	}
	return msg, false, err
}
