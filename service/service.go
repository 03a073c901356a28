package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Service answers the API on one NATS connection for one router. Build it with [New] and
// stop it with [Service.Stop]; the connection and the router stay the caller's.
type Service struct {
	nc      *nats.Conn
	router  *sandbox.Router
	o       options
	log     *zap.Logger
	id      string
	started time.Time
	svc     micro.Service
	alive   *nats.Subscription
	subs    int // the connection's subscriptions before the service added its own, alive included

	life  context.Context // ends when Stop gives up waiting: in-flight calls are abandoned
	abort context.CancelFunc

	handles   *handles
	transfers *transfers
	failures  lastFailure // the last engine failure, for health

	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed when inFlight reaches 0, while Stop waits
	draining bool
	closed   bool

	janitorStop chan struct{}
	janitorDone chan struct{}
	stopOnce    sync.Once
	stopErr     error
}

// flushTimeout bounds the round trip New makes to be sure the server has its subscriptions.
const flushTimeout = 10 * time.Second

// envelopeOverhead is the room a chunk's message leaves for the JSON around its data.
const envelopeOverhead = 8 * 1024

// New starts answering the API on nc for router: it adds the nats micro service
// [ServiceName] with one endpoint per operation and subject (see subjects.go). It fails with
// an [*sandbox.InvalidArgumentError] for a nil connection or router or a bad option, and
// with the client's error when a subscription cannot be made. It returns once the server
// has the subscriptions.
func New(nc *nats.Conn, router *sandbox.Router, opts ...Option) (*Service, error) {
	if nc == nil || router == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "service: a NATS connection and a router are required"}
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.engineID == "" {
		o.engineID = nuid.Next()
	}
	maxPayload := int(nc.MaxPayload())
	if o.maxRequestBytes == 0 {
		o.maxRequestBytes = maxPayload
	}
	fits := (min(maxPayload, o.maxRequestBytes) - envelopeOverhead) / 4 * 3
	if o.chunkSize == 0 {
		o.chunkSize = fits
	}
	if o.chunkSize > fits || o.chunkSize < 1024 {
		return nil, errOption("chunk size %d does not fit a request of at most %d bytes once encoded", o.chunkSize, min(maxPayload, o.maxRequestBytes))
	}
	life, abort := context.WithCancel(context.Background())
	s := &Service{
		nc: nc, router: router, o: o, id: o.engineID, started: time.Now().UTC(),
		log:  o.logger.With(zap.String("engine", o.engineID)),
		life: life, abort: abort,
		handles:     newHandles(),
		transfers:   newTransfers(o.chunkSize, o.maxFileBytes, o.transferMemory, o.transferTTL),
		janitorStop: make(chan struct{}), janitorDone: make(chan struct{}),
		subs: nc.NumSubscriptions(),
	}
	alive, err := nc.Subscribe(Engine(SubjectEngineAliveT, o.prefix, s.id), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		abort()
		return nil, fmt.Errorf("subscribe to the alive subject: %w", err)
	}
	s.alive, s.subs = alive, s.subs+1
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     o.version,
		Description: "maf-sandbox engine: sandboxes for AI agents' tool calls in Docker",
		Metadata:    map[string]string{"engine": s.id, "prefix": o.prefix},
		QueueGroup:  QueueGroup,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Warn("nats service error", zap.String("subject", e.Subject), zap.String("error", e.Description))
		},
	})
	if err != nil {
		_ = alive.Unsubscribe()
		abort()
		return nil, fmt.Errorf("add micro service: %w", err)
	}
	s.svc = svc
	for _, op := range operations {
		if op.shared != "" {
			err = svc.AddEndpoint(op.name, s.endpoint(op), micro.WithEndpointSubject(Shared(op.shared, o.prefix)),
				micro.WithEndpointQueueGroup(QueueGroup))
		}
		if err == nil && op.engine != "" {
			name := op.name
			if op.shared != "" {
				name = "engine-" + op.name
			}
			err = svc.AddEndpoint(name, s.endpoint(op), micro.WithEndpointSubject(Engine(op.engine, o.prefix, s.id)),
				micro.WithEndpointQueueGroupDisabled())
		}
		if err != nil {
			_ = svc.Stop()
			_ = alive.Unsubscribe()
			abort()
			return nil, fmt.Errorf("add endpoint %s: %w", op.name, err)
		}
	}
	// Once the server has the subscriptions, a request sent after New returns finds them.
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		_ = svc.Stop()
		_ = alive.Unsubscribe()
		abort()
		return nil, fmt.Errorf("flush the subscriptions: %w", err)
	}
	go s.janitor()
	s.log.Info("engine serving", zap.String("prefix", o.prefix), zap.String("version", o.version),
		zap.Int("chunk_size", o.chunkSize), zap.Int("max_request_bytes", o.maxRequestBytes))
	return s, nil
}

// EngineID is the ID this engine answers its per-engine subjects under.
func (s *Service) EngineID() string { return s.id }

// Prefix is the subject prefix the service answers under.
func (s *Service) Prefix() string { return s.o.prefix }

// Stop drains the service: its endpoints stop taking requests, the requests already
// delivered are handled, and Stop returns once they have all replied. When ctx ends first,
// the calls still running are abandoned (their contexts end) and Stop returns ctx's error
// after they return. Stop does not close the connection. Calling it again returns the first
// result.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.draining = true
		s.mu.Unlock()
		s.log.Info("engine draining", zap.Int("in_flight", s.inFlightNow()))
		err := s.svc.Stop()
		waitErr := s.waitDrained(ctx)
		if waitErr == nil {
			waitErr = s.waitIdle(ctx)
		}
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if err := s.alive.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Debug("unsubscribe the alive subject", zap.Error(err))
		}
		s.abort()
		if waitErr != nil {
			// The abandoned calls see their context end; give them a moment to reply.
			wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.waitIdle(wait); err != nil {
				s.log.Warn("calls still running after stop", zap.Int("in_flight", s.inFlightNow()))
			}
			cancel()
		}
		close(s.janitorStop)
		<-s.janitorDone
		s.stopErr = errors.Join(err, waitErr)
		s.log.Info("engine stopped", zap.Error(s.stopErr))
	})
	return s.stopErr
}

// waitDrained waits until the endpoints' subscriptions are gone (the alive subscription
// stays until the end): the client removes a draining subscription once every message the
// server delivered to it has reached its handler.
func (s *Service) waitDrained(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.nc.NumSubscriptions() > s.subs && !s.nc.IsClosed() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain subscriptions: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// waitIdle waits until no request is being handled.
func (s *Service) waitIdle(ctx context.Context) error {
	s.mu.Lock()
	if s.inFlight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for in-flight calls: %w", ctx.Err())
	}
}

func (s *Service) inFlightNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// begin admits one request, or says why not: the engine has stopped, or is at its bound.
func (s *Service) begin(subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return &EngineUnavailableError{Subject: subject, Reason: "the engine has stopped"}
	case s.inFlight >= s.o.maxInFlight:
		return &EngineUnavailableError{Subject: subject, Reason: fmt.Sprintf("the engine is handling its limit of %d calls", s.o.maxInFlight)}
	}
	s.inFlight++
	return nil
}

func (s *Service) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if s.inFlight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

func (s *Service) janitor() {
	defer close(s.janitorDone)
	t := time.NewTicker(max(s.o.transferTTL/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-s.janitorStop:
			return
		case now := <-t.C:
			if n := s.transfers.expire(now); n > 0 {
				s.log.Debug("expired idle transfers", zap.Int("count", n))
			}
		}
	}
}

// operation is one API call: its endpoint name, its subject templates (shared, per-engine
// or both), its message types and its handler.
type operation struct {
	name     string
	shared   string
	engine   string
	reqType  string
	respType string
	run      func(ctx context.Context, s *Service, data []byte) (any, error)
}

// endpoint handles each request on its own goroutine, so a long exec never holds up the
// subscription, and counts it until it has replied.
func (s *Service) endpoint(op operation) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if err := s.begin(req.Subject()); err != nil {
			s.reply(req, op, nil, err, time.Now())
			return
		}
		go func() {
			defer s.end()
			s.handle(req, op)
		}()
	})
}

func (s *Service) handle(req micro.Request, op operation) {
	start := time.Now()
	resp, err := s.call(req, op)
	s.failures.note(op.name, err)
	s.reply(req, op, resp, err, start)
}

// call checks the request's size, JSON and type, then runs the operation under a context
// bounded by the engine's life and the caller's wait.
func (s *Service) call(req micro.Request, op operation) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", zap.String("op", op.name), zap.Any("panic", p))
			resp, err = nil, &InternalError{Message: fmt.Sprintf("the engine failed handling %s", op.name)}
		}
	}()
	data := req.Data()
	if len(data) > s.o.maxRequestBytes {
		return nil, &BadRequestError{Reason: fmt.Sprintf("payload of %d bytes exceeds the engine's limit of %d; send large files in upload_chunk requests", len(data), s.o.maxRequestBytes)}
	}
	data = orBodyless(data, op.reqType)
	var env messages.APIEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, bodyError(err)
	}
	switch {
	case env.Type == "":
		return nil, &BadRequestError{Field: "type", Reason: fmt.Sprintf("the request has no type; %s wants %q", req.Subject(), op.reqType)}
	case env.Type != op.reqType:
		return nil, &BadRequestError{Field: "type", Reason: fmt.Sprintf("unknown operation %q on %s, which takes %q", env.Type, req.Subject(), op.reqType)}
	case env.WaitMS < 0:
		return nil, &BadRequestError{Field: "wait_ms", Reason: fmt.Sprintf("field wait_ms must not be negative, got %d", env.WaitMS)}
	}
	ctx := s.life
	if env.WaitMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(env.WaitMS)*time.Millisecond)
		defer cancel()
	}
	return op.run(ctx, s, data)
}

// reply sends resp, or the error as the operation's response type with an error object and
// micro's error headers. It publishes on the request's reply subject itself: micro's
// Request may only be answered on the goroutine that received it.
func (s *Service) reply(req micro.Request, op operation, resp any, err error, start time.Time) {
	log := s.log.With(zap.String("op", op.name), zap.String("subject", req.Subject()), zap.Duration("elapsed", time.Since(start)))
	if req.Reply() == "" {
		log.Debug("request without a reply subject dropped")
		return
	}
	if err == nil {
		setType(resp, op.respType)
		b, merr := json.Marshal(resp)
		switch {
		case merr != nil:
			err = &InternalError{Message: "encode response: " + merr.Error()}
		case len(b) > int(s.nc.MaxPayload()):
			err = &InternalError{Message: fmt.Sprintf("the %s response of %d bytes exceeds the max payload", op.name, len(b))}
		default:
			if perr := s.nc.Publish(req.Reply(), b); perr != nil {
				log.Warn("reply", zap.Error(perr))
			}
			log.Debug("call")
			return
		}
	}
	wire := EncodeError(err)
	b, _ := json.Marshal(messages.APIResponse{Type: op.respType, Error: wire})
	if wire.Code == CodeInternal {
		log.Warn("call failed", zap.String("code", wire.Code), zap.Error(err))
	} else {
		log.Debug("call refused", zap.String("code", wire.Code), zap.Error(err))
	}
	msg := &nats.Msg{Subject: req.Reply(), Data: b, Header: nats.Header{}}
	msg.Header.Set(micro.ErrorCodeHeader, wire.Code)
	msg.Header.Set(micro.ErrorHeader, headerText(wire.Message))
	if perr := s.nc.PublishMsg(msg); perr != nil {
		log.Warn("reply", zap.Error(perr))
	}
}

// headerText makes a message fit a header value: one line, at most 1 KiB.
func headerText(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	if msg == "" {
		msg = "error"
	}
	return msg
}

// setType sets the Type of the APIResponse that resp (a pointer to a response) embeds.
func setType(resp any, typ string) {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	if f := v.Elem().FieldByName("APIResponse"); f.IsValid() {
		f.FieldByName("Type").SetString(typ)
	}
}

// decode reads data strictly into a T: unknown fields and trailing data are refused.
func decode[T any](data []byte) (*T, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		return nil, bodyError(err)
	}
	if dec.More() {
		return nil, &BadRequestError{Reason: "malformed request: data after the JSON object"}
	}
	if err := checkFields(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// requireKey returns the envelope's key, refusing a missing one or one without a scope. An
// empty thread_id or agent_id is a key like any other, as the reference accepts it: its names
// and labels are derived from the empty strings (docker/names.go, docker/labels.go).
func requireKey(env *messages.APIEnvelope) (sandbox.Key, error) {
	if env.Key == nil {
		return sandbox.Key{}, &BadRequestError{Field: "key", Reason: "missing key: the envelope carries no key"}
	}
	k := KeyFromWire(env.Key)
	if k.Scope == "" {
		return sandbox.Key{}, &BadRequestError{Field: "key.scope", Reason: "missing key: the envelope's key has no scope"}
	}
	return k, nil
}

// sandboxFor returns the handle the envelope names, refusing it under any key but its own.
func (s *Service) sandboxFor(env *messages.APIEnvelope) (*handle, error) {
	key, err := requireKey(env)
	if err != nil {
		return nil, err
	}
	if env.Sandbox == "" {
		return nil, &BadRequestError{Field: "sandbox", Reason: "missing sandbox: the envelope names no sandbox handle"}
	}
	h := s.handles.get(env.Sandbox)
	if h == nil {
		return nil, &UnknownSandboxError{Sandbox: env.Sandbox, Engine: s.id}
	}
	if h.key != key {
		return nil, &BadRequestError{Reason: fmt.Sprintf("sandbox %q was not acquired under this key", env.Sandbox)}
	}
	return h, nil
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
