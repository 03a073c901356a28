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
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// Service answers the API on one NATS connection for one router. Build it with [New] and
// stop it with [Service.Stop]; the connection and the router stay the caller's.
type Service struct {
	nc      *nats.Conn
	router  *sandbox.Router
	owner   *placement.Owner // placement.go: the layer around the router for acquires, disposals, purges
	obs     sandbox.Observer // report.go: the router's, for the service's own acts
	tenancy *tenancy         // tenancy.go; nil: one tenant
	o       options
	log     *zap.Logger
	tracer  trace.Tracer
	id      string
	started time.Time

	handles   *handles
	transfers *transfers
	failures  lastFailure // the last engine failure, for health

	gate callGate    // the calls in flight, their bounds and the engine's serving state
	eps  endpointSet // endpoints.go: every subject the engine answers
	jan  janitor     // the expiry of idle transfers and the daemon's probe
	conn connAge     // connection.go: the connection's age, for the alive reply

	life      context.Context // ends when Stop gives up waiting: in-flight calls are abandoned
	abort     context.CancelFunc
	unobserve func() error // stops the sandboxes and leases gauges (telemetry)
	stopOnce  sync.Once
	stopErr   error
}

// callGate counts the calls in flight against their bounds (admission.go) and holds whether
// the engine still takes them: draining, lame duck, closed.
type callGate struct {
	mu       sync.Mutex
	inFlight int           // every call being handled, health's included
	admitted *admission    // the bounds on calls in flight, guarded by mu
	idle     chan struct{} // closed when inFlight reaches 0, while Stop waits
	draining bool
	lameDuck bool // lameduck.go: no new sandboxes
	closed   bool
}

// janitor expires idle transfers and, with an observer, asks the daemon whether it answers.
type janitor struct {
	stop, done chan struct{}
	daemonDown atomic.Bool // report.go: the last probe found the daemon away
}

// flushTimeout bounds the round trip New makes to be sure the server has its subscriptions.
const flushTimeout = 10 * time.Second

// envelopeOverhead is the room a chunk's message leaves for the JSON around its data.
const envelopeOverhead = 8 * 1024

// New starts answering the API on nc for router: it answers as the nats micro service
// [messages.ServiceName] with one endpoint per operation and subject (messages/subjects.go) and the alive
// subject, each counted on $SRV.STATS (endpoints.go says why the engine speaks the micro
// protocol itself). It fails with
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
	if err := o.settle(); err != nil {
		return nil, err
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
	obs := router.Observer()
	if obs == nil {
		obs = sandbox.NopObserver{}
	}
	s := &Service{obs: obs,
		tracer: telemetry.Tracer(o.tracer), tenancy: o.tenancy,
		nc: nc, router: router, o: o, id: o.engineID, started: time.Now().UTC(),
		log:  o.logger.With(zap.String("engine", o.engineID)),
		life: life, abort: abort,
		handles:   newHandles(),
		gate:      callGate{admitted: newAdmission(o.maxInFlight, o.maxPerAccount)},
		transfers: newTransfers(o.chunkSize, o.maxFileBytes, o.transferMemory, o.transferTTL),
		jan:       janitor{stop: make(chan struct{}), done: make(chan struct{})},
		eps:       endpointSet{subs: nc.NumSubscriptions()},
	}
	owner, err := s.newOwner() // placement.go
	if err != nil {
		abort()
		return nil, err
	}
	s.owner = owner
	if err := s.listen(); err != nil {
		s.unsubscribe()
		abort()
		return nil, err
	}
	// Once the server has the subscriptions, a request sent after New returns finds them.
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		s.unsubscribe()
		abort()
		return nil, fmt.Errorf("flush the subscriptions: %w", err)
	}
	unobserve, err := o.metrics.ObserveSandboxes(s.handles.byKind)
	if err != nil {
		s.unsubscribe()
		abort()
		return nil, err
	}
	s.unobserve = unobserve
	if owner.Placed() {
		unobserveLeases, err := o.metrics.ObserveLeases(owner.Leases)
		if err != nil {
			s.log.Warn("placement leases are not reported to the metrics", zap.Error(err))
		} else {
			s.unobserve = func() error { return errors.Join(unobserveLeases(), unobserve()) }
		}
	}
	go s.janitor()
	s.watchConnection()
	owner.Start()
	mode := "single tenant: every caller may use every scope"
	if o.tenancy != nil {
		mode = o.tenancy.describe()
	}
	s.log.Info("engine serving", zap.String("mode", mode), zap.String("prefix", o.prefix), zap.String("version", o.version),
		zap.Int("chunk_size", o.chunkSize), zap.Int("max_request_bytes", o.maxRequestBytes))
	s.engineState(sandbox.EngineStarted, nil)
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
		s.gate.mu.Lock()
		s.gate.draining = true
		s.gate.mu.Unlock()
		s.log.Info("engine draining", zap.Int("in_flight", s.inFlightNow()))
		s.engineState(sandbox.EngineDraining, nil)
		err := s.drain()
		waitErr := s.waitDrained(ctx)
		if waitErr == nil {
			waitErr = s.waitIdle(ctx)
		}
		s.gate.mu.Lock()
		s.gate.closed = true
		s.gate.mu.Unlock()
		if err := s.eps.alive.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
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
		close(s.jan.stop)
		<-s.jan.done
		release, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.owner.Stop(release) // the leases given up, the members bucket left
		cancel()
		s.stopConnWatch()
		if uerr := s.unobserve(); uerr != nil {
			s.log.Debug("stop observing the sandboxes", zap.Error(uerr))
		}
		s.stopErr = errors.Join(err, waitErr)
		s.log.Info("engine stopped", zap.Error(s.stopErr))
		s.engineState(sandbox.EngineStopped, nil)
	})
	return s.stopErr
}

// waitDrained waits until the endpoints' subscriptions are gone (the alive subscription
// stays until the end): the client removes a draining subscription once every message the
// server delivered to it has reached its handler.
func (s *Service) waitDrained(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.nc.NumSubscriptions() > s.eps.subs && !s.nc.IsClosed() {
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
	s.gate.mu.Lock()
	if s.gate.inFlight == 0 {
		s.gate.mu.Unlock()
		return nil
	}
	if s.gate.idle == nil {
		s.gate.idle = make(chan struct{})
	}
	idle := s.gate.idle
	s.gate.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for in-flight calls: %w", ctx.Err())
	}
}

func (s *Service) inFlightNow() int {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return s.gate.inFlight
}

// begin admits one request, or says why not: the engine has stopped, or the caller's account
// or the engine is at its bound (admission.go).
func (s *Service) begin(c *call) error {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if s.gate.closed {
		return &messages.EngineUnavailableError{Subject: c.msg.Subject, Reason: "the engine has stopped"}
	}
	if err := s.gate.admitted.admit(c.msg.Subject, c.account, c.op.name == "health"); err != nil {
		return err
	}
	s.gate.inFlight++
	return nil
}

// release gives back the call's admission (admission.go) once its answer is made; the call
// stays in flight, for a drain, until the answer is sent (end).
func (s *Service) release(c *call) {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	s.gate.admitted.release(c.account, c.op.name == "health")
}

func (s *Service) end(c *call) {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	s.gate.inFlight--
	if s.gate.inFlight == 0 && s.gate.idle != nil {
		close(s.gate.idle)
		s.gate.idle = nil
	}
}

func (s *Service) janitor() {
	defer close(s.jan.done)
	t := time.NewTicker(max(s.o.transferTTL/4, time.Second))
	defer t.Stop()
	var probe <-chan time.Time // report.go: the daemon's transitions, with an observer
	if s.router.Observer() != nil && s.o.daemonProbe > 0 {
		pt := time.NewTicker(s.o.daemonProbe)
		defer pt.Stop()
		probe = pt.C
	}
	for {
		select {
		case <-s.jan.stop:
			return
		case <-probe:
			s.daemonHealth(s.life)
		case now := <-t.C:
			if n := s.transfers.expire(now); n > 0 {
				s.log.Debug("expired idle transfers", zap.Int("count", n))
			}
		}
	}
}

// operation is one API call: its endpoint name, its subject templates (shared, per-engine
// or both), its message types, its handler and what $SRV.INFO says it does.
type operation struct {
	name        string
	shared      string
	engine      string
	reqType     string
	respType    string
	run         func(ctx context.Context, s *Service, c *call, data []byte) (any, error)
	description string
}

// listen subscribes every operation's endpoints, the alive subject and the $SRV subjects.
// On an error the caller unsubscribes what was made.
func (s *Service) listen() error {
	for _, op := range operations {
		meta := endpointMeta(op.description, op.reqType, op.respType)
		if op.shared != "" {
			e := &endpoint{name: op.name, subject: messages.Shared(op.shared, s.o.prefix), queue: messages.QueueGroup, meta: meta}
			s.eps.all = append(s.eps.all, e)
			if err := s.subscribe(e, s.serve(e, op)); err != nil {
				return err
			}
		}
		if op.engine != "" {
			name := op.name
			if op.shared != "" {
				name = "engine-" + op.name
			}
			e := &endpoint{name: name, subject: messages.Engine(op.engine, s.o.prefix, s.id), meta: meta}
			s.eps.all = append(s.eps.all, e)
			if err := s.subscribe(e, s.serve(e, op)); err != nil {
				return err
			}
		}
	}
	// alive answers through the drain (Stop unsubscribes it last), so a client can tell a
	// draining engine from a dead one while its calls finish.
	s.eps.alive = &endpoint{name: "alive", subject: messages.Engine(messages.SubjectEngineAliveT, s.o.prefix, s.id),
		meta: map[string]string{"description": "answers while the engine runs, through its drain, with its connection's age: the Go client's liveness probe",
			"request_type": "any", "response_type": "alive"}}
	s.eps.all = append(s.eps.all, s.eps.alive)
	alive := s.eps.alive
	if err := s.subscribe(alive, func(m *nats.Msg) {
		start := time.Now()
		if m.Reply != "" {
			_ = s.nc.Publish(m.Reply, s.aliveReply())
		}
		alive.record(time.Since(start), "", "")
	}); err != nil {
		return err
	}
	s.eps.subs++
	return s.discover()
}

// drain stops the endpoints but alive, and the $SRV subjects, from taking requests; the
// messages already delivered are still handled. A closed connection has nothing to drain.
func (s *Service) drain() error {
	var errs []error
	add := func(err error) {
		if err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, err)
		}
	}
	for _, e := range s.eps.all {
		if e != s.eps.alive && e.sub != nil {
			add(e.sub.Drain())
		}
	}
	for _, sub := range s.eps.control {
		add(sub.Drain())
	}
	return errors.Join(errs...)
}

// unsubscribe drops every subscription New made, for a New that fails.
func (s *Service) unsubscribe() {
	for _, e := range s.eps.all {
		if e.sub != nil {
			_ = e.sub.Unsubscribe()
		}
	}
	for _, sub := range s.eps.control {
		_ = sub.Unsubscribe()
	}
}

// serve handles each request of op on its own goroutine, so a long exec never holds up the
// subscription, and counts it until it has replied.
func (s *Service) serve(e *endpoint, op operation) nats.MsgHandler {
	return func(m *nats.Msg) {
		c := s.newCall(m, e, op)
		c.account = s.admissionAccount(m.Header) // admission.go
		if err := s.begin(c); err != nil {
			s.reply(c, nil, err)
			return
		}
		go func() {
			defer s.end(c)
			resp, err := s.call(c)
			s.failures.note(op.name, err)
			s.release(c) // before the answer: a caller that heard it and calls again is admitted
			s.reply(c, resp, err)
		}()
	}
}

// call checks the request's size, JSON and type, then runs the operation under a context
// bounded by the engine's life and the caller's wait. Once the envelope is read, the call's
// logger carries its key and handle.
func (s *Service) call(c *call) (resp any, err error) {
	op := c.op
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panicked", zap.Any("panic", p))
			resp, err = nil, &messages.InternalError{Message: fmt.Sprintf("the engine failed handling %s", op.name)}
		}
	}()
	data := c.msg.Data
	if len(data) > s.o.maxRequestBytes {
		return nil, &messages.BadRequestError{Reason: fmt.Sprintf("payload of %d bytes exceeds the engine's limit of %d; send large files in upload_chunk requests", len(data), s.o.maxRequestBytes)}
	}
	data = orBodyless(data, op.reqType)
	var env messages.APIEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, bodyError(err)
	}
	if env.Key != nil {
		c.log = c.log.With(zap.Stringer("key", messages.KeyFromWire(env.Key)))
	}
	if env.Sandbox != "" {
		c.log = c.log.With(zap.String("handle", env.Sandbox))
	}
	subject := c.msg.Subject
	switch {
	case env.Type == "":
		return nil, &messages.BadRequestError{Field: "type", Reason: fmt.Sprintf("the request has no type; %s wants %q", subject, op.reqType)}
	case env.Type != op.reqType:
		return nil, &messages.BadRequestError{Field: "type", Reason: fmt.Sprintf("unknown operation %q on %s, which takes %q", env.Type, subject, op.reqType)}
	case env.WaitMS < 0:
		return nil, &messages.BadRequestError{Field: "wait_ms", Reason: fmt.Sprintf("field wait_ms must not be negative, got %d", env.WaitMS)}
	}
	if s.tenancy != nil {
		id, err := s.authorize(op.name, c.msg.Header, &env, data) // tenancy.go
		if id != nil {
			c.identity = id
			c.log = c.log.With(zap.String("account", id.Account))
		}
		if err != nil {
			s.refused(c.ctx, c, err) // report.go
			return nil, err
		}
	}
	ctx := s.callContext(withCall(c.ctx, c), c, namedHandle(env.Sandbox)) // report.go
	ctx, unfence := s.fenced(ctx, env.Sandbox)                            // placement.go: the call ends with the lease
	defer unfence()
	if env.WaitMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(env.WaitMS)*time.Millisecond)
		defer cancel()
	}
	resp, err = op.run(ctx, s, c, data)
	err = fenceError(ctx, err)
	if env.Sandbox != "" && sandboxGone(err) {
		s.transfers.forget(s.handles.bury(env.Sandbox))
	}
	return resp, err
}

// sandboxGone reports an answer after which the sandbox no longer exists: a call on an
// instance that is gone, or a timeout or output overflow for which the backend discarded the
// sandbox.
func sandboxGone(err error) bool {
	var te *sandbox.TimeoutError
	var oe *sandbox.ExecOutputLimitExceededError
	return errors.Is(err, sandbox.ErrGone) || (errors.As(err, &te) && te.Discarded) || (errors.As(err, &oe) && oe.Discarded)
}

// reply sends resp, or the error as the operation's response type with an error object and
// micro's error headers, with the call's correlation headers; then counts the call on its
// endpoint, from the request's arrival, as an error when the reply carries one.
func (s *Service) reply(c *call, resp any, err error) {
	op := c.op
	errText := ""
	code := ""
	defer func() {
		elapsed := time.Since(c.start)
		c.ep.record(elapsed, errText, code)
		s.o.metrics.Call(s.life, op.name, elapsed, code)
		if code != "" {
			c.span.SetAttributes(telemetry.KeyErrorType.String(code))
			c.span.SetStatus(otelcodes.Error, code)
		}
		c.span.End()
	}()
	log := c.log.With(zap.Duration("elapsed", time.Since(c.start)))
	msg := &nats.Msg{Subject: c.msg.Reply, Header: c.headers()}
	if err == nil {
		setType(resp, op.respType)
		b, merr := json.Marshal(resp)
		switch {
		case merr != nil:
			err = &messages.InternalError{Message: "encode response: " + merr.Error()}
		case len(b) > int(s.nc.MaxPayload()):
			err = &messages.InternalError{Message: fmt.Sprintf("the %s response of %d bytes exceeds the max payload", op.name, len(b))}
		default:
			msg.Data = b
		}
	}
	if err != nil {
		apiErr := messages.EncodeError(err)
		msg.Data, _ = json.Marshal(messages.APIResponse{Type: op.respType, Error: apiErr})
		msg.Header.Set(micro.ErrorCodeHeader, apiErr.Code)
		msg.Header.Set(micro.ErrorHeader, headerText(apiErr.Message))
		errText = apiErr.Code + ": " + headerText(apiErr.Message)
		code = apiErr.Code
		if apiErr.Code == messages.CodeInternal {
			log.Warn("call failed", zap.String("code", apiErr.Code), zap.Error(err))
		} else {
			log.Debug("call refused", zap.String("code", apiErr.Code), zap.Error(err))
		}
	} else {
		log.Debug("call")
	}
	if c.msg.Reply == "" {
		log.Debug("request without a reply subject: no reply sent")
		return
	}
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
		return nil, &messages.BadRequestError{Reason: "malformed request: data after the JSON object"}
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
		return sandbox.Key{}, &messages.BadRequestError{Field: "key", Reason: "missing key: the envelope carries no key"}
	}
	k := messages.KeyFromWire(env.Key)
	if k.Scope == "" {
		return sandbox.Key{}, &messages.BadRequestError{Field: "key.scope", Reason: "missing key: the envelope's key has no scope"}
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
		return nil, &messages.BadRequestError{Field: "sandbox", Reason: "missing sandbox: the envelope names no sandbox handle"}
	}
	h := s.handles.get(env.Sandbox)
	if h == nil {
		if b, ok := s.handles.buriedHandle(env.Sandbox); ok && b.key == key {
			return nil, &sandbox.GoneError{InstanceID: b.instance, Reason: "an earlier call found it gone"}
		}
		return nil, &messages.UnknownSandboxError{Sandbox: env.Sandbox, Engine: s.id}
	}
	if h.key != key {
		return nil, &messages.BadRequestError{Reason: fmt.Sprintf("sandbox %q was not acquired under this key", env.Sandbox)}
	}
	if err := s.checkLease(h); err != nil {
		return nil, err
	}
	h.touch() // inventory.go: the last call
	return h, nil
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
