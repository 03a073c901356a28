package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Backend is a remote engine as a [sandbox.Backend]: every call is a request to the engine
// pool on NATS. Build it with [New], which reads the engine's declarations once, as the
// protocol wants them settled before a backend is registered.
type Backend struct {
	nc  *nats.Conn
	o   options
	log *zap.Logger

	name         string
	isolation    sandbox.Isolation
	declarations sandbox.Declarations
	chunkSize    int
	maxFileBytes int64

	mu        sync.Mutex
	placement map[sandbox.Key]string // the engine that last served each key
}

var _ sandbox.Backend = (*Backend)(nil)

// New connects a client to the engine pool on nc and reads its declarations, retrying
// while no engine answers (see [WithRetryWait]). It fails when none answers in time, with
// an [*messages.EngineUnavailableError], or when the pool serves no fixed backend.
func New(ctx context.Context, nc *nats.Conn, opts ...Option) (*Backend, error) {
	if nc == nil {
		return nil, &sandbox.InvalidArgumentError{Reason: "client: a NATS connection is required"}
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
	b := &Backend{nc: nc, o: o, log: o.logger, name: "remote", placement: map[sandbox.Key]string{}}
	if o.noDeclarations {
		return b, nil // operator.go
	}
	req := &messages.APIDeclarationsRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDeclarationsRequestType}}
	var resp messages.APIDeclarationsResponse
	if err := b.do(ctx, b.cold(messages.SubjectDeclarationsT, messages.SubjectEngineDeclarationsT, &req.APIEnvelope, req, &resp,
		messages.APIDeclarationsResponseType)); err != nil {
		return nil, fmt.Errorf("read the engine's declarations: %w", err)
	}
	var selected *messages.APIBackend
	for i := range resp.Backends {
		if resp.Backends[i].Name == resp.Selected {
			selected = &resp.Backends[i]
		}
	}
	if selected == nil {
		return nil, &sandbox.NoBackendError{Selected: resp.Selected}
	}
	b.name = selected.Name
	b.isolation = sandbox.Isolation(selected.Isolation)
	b.declarations = messages.DeclarationsFromWire(selected.Declarations)
	b.chunkSize, b.maxFileBytes = resp.ChunkSize, resp.MaxFileBytes
	if b.chunkSize <= 0 {
		return nil, &sandbox.ProtocolError{Backend: b.name, Reason: "the engine declares no chunk size"}
	}
	b.log = o.logger.With(zap.String("backend", b.name), zap.String("prefix", o.prefix))
	return b, nil
}

// Name is the remote backend's name ("docker" for the Docker engine).
func (b *Backend) Name() string { return b.name }

// Isolation is the remote backend's rung.
func (b *Backend) Isolation() sandbox.Isolation { return b.isolation }

// Declarations is what the remote backend declared when the client was built.
func (b *Backend) Declarations() sandbox.Declarations { return b.declarations }

// cold builds a call to a shared subject, or to the pinned engine's subject.
func (b *Backend) cold(shared, engine string, env *messages.APIEnvelope, req, resp any, respType string) call {
	if b.o.engine != "" {
		return call{subject: messages.Engine(engine, b.o.prefix, b.o.engine), env: env, req: req, resp: resp, respType: respType,
			pinned: true, engine: b.o.engine, repeatable: repeatable[engine]}
	}
	return call{subject: messages.Shared(shared, b.o.prefix), env: env, req: req, resp: resp, respType: respType,
		repeatable: repeatable[shared]}
}

// Acquire gets or creates the sandbox of (key, spec.Kind) on the engine pool. A key the
// client has acquired before goes to the engine that served it, so warm reuse keeps
// working with several engines; when that engine is gone the pool serves it.
func (b *Backend) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.o.noDeclarations {
		return nil, &sandbox.UnsupportedError{Backend: b.name, Op: "Acquire",
			Reason: "this client was built without the pool's declarations (WithoutDeclarations): it makes the operator's calls only"}
	}
	if !spec.Valid() {
		return nil, &sandbox.InvalidArgumentError{Reason: "the spec was not built by sandbox.NewSpec"}
	}
	req := &messages.APIAcquireRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIAcquireRequestType, Key: messages.KeyToWire(key)},
		Spec: messages.SpecToWire(spec)}
	var resp messages.APIAcquireResponse
	c := b.cold(messages.SubjectAcquireT, messages.SubjectEngineAcquireT, &req.APIEnvelope, req, &resp, messages.APIAcquireResponseType)
	if engine := b.owner(key, &spec.Kind); engine != "" && b.o.engine == "" {
		pinned := c
		pinned.subject, pinned.pinned, pinned.engine = messages.Engine(messages.SubjectEngineAcquireT, b.o.prefix, engine), true, engine
		err := b.do(ctx, pinned)
		if !errors.Is(err, messages.ErrUnavailable) {
			return b.acquired(key, spec, &resp, err)
		}
		b.log.Debug("the engine that served the key is gone; asking the pool", zap.String("engine", engine), zap.String("key", key.String()))
	}
	return b.acquired(key, spec, &resp, b.do(ctx, c))
}

func (b *Backend) acquired(key sandbox.Key, spec sandbox.Spec, resp *messages.APIAcquireResponse, err error) (sandbox.Sandbox, error) {
	if err != nil {
		return nil, err
	}
	w := resp.Sandbox
	if w == nil || w.ID == "" || w.Engine == "" {
		return nil, &sandbox.ProtocolError{Backend: b.name, Reason: "the acquire reply names no sandbox handle or engine"}
	}
	b.mu.Lock()
	b.placement[key] = w.Engine
	b.mu.Unlock()
	return &Sandbox{b: b, id: w.ID, engine: w.Engine, key: key, spec: spec.Clone(), kind: w.Kind,
		workDir: w.WorkDir, created: w.Created, instance: w.InstanceID}, nil
}

func (b *Backend) placed(key sandbox.Key) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.placement[key]
}

// Dispose deletes the key's sandboxes through the engine that served the key (the pool
// when none did). It never fails the caller: a call that could not be made comes back as a
// [sandbox.DisposalFailure] (unreachable when no engine answered, timeout when the call
// ran out of time, unknown otherwise).
func (b *Backend) Dispose(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) *sandbox.DisposalFailure {
	req := &messages.APIDisposeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeRequestType, Key: messages.KeyToWire(key)},
		Kind: opts.Kind, InstanceID: opts.InstanceID}
	var resp messages.APIDisposeResponse
	c := b.cold(messages.SubjectDisposeT, messages.SubjectEngineDisposeT, &req.APIEnvelope, req, &resp, messages.APIDisposeResponseType)
	pool := true
	var err error
	if engine := b.owner(key, opts.Kind); engine != "" && b.o.engine == "" {
		pinned := c
		pinned.subject, pinned.pinned, pinned.engine = messages.Engine(messages.SubjectEngineDisposeT, b.o.prefix, engine), true, engine
		err = b.do(ctx, pinned)
		pool = errors.Is(err, messages.ErrUnavailable) // that engine is gone: any engine of the pool disposes by label
	}
	if pool {
		err = b.do(ctx, c)
	}
	if err != nil {
		return failureOf(err)
	}
	if opts.Kind == nil && opts.InstanceID == "" && resp.Undisposed == nil {
		b.mu.Lock()
		delete(b.placement, key)
		b.mu.Unlock()
	}
	return messages.FailureFromWire(resp.Undisposed)
}

// DisposeScope deletes every sandbox of a conversation through the pool. It never fails
// the caller; see [Backend.Dispose] for how a failed call is reported.
func (b *Backend) DisposeScope(ctx context.Context, scope, threadID string) sandbox.ScopePurge {
	req := &messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType,
		Key: &messages.APIKey{Scope: scope, ThreadID: threadID}}}
	var resp messages.APIDisposeScopeResponse
	if err := b.do(ctx, b.cold(messages.SubjectDisposeScopeT, messages.SubjectEngineDisposeScopeT, &req.APIEnvelope, req, &resp,
		messages.APIDisposeScopeResponseType)); err != nil {
		return sandbox.ScopePurge{Undisposed: failureOf(err)}
	}
	if resp.Undisposed == nil {
		b.mu.Lock()
		for k := range b.placement {
			if k.Scope == scope && k.ThreadID == threadID {
				delete(b.placement, k)
			}
		}
		b.mu.Unlock()
	}
	return sandbox.ScopePurge{Disposed: resp.Disposed, Undisposed: messages.FailureFromWire(resp.Undisposed)}
}

// failureOf reports a disposal call that failed as a disposal failure.
func failureOf(err error) *sandbox.DisposalFailure {
	code := sandbox.DisposalUnknown
	switch {
	case errors.Is(err, messages.ErrUnavailable):
		code = sandbox.DisposalUnreachable
	case errors.Is(err, context.DeadlineExceeded):
		code = sandbox.DisposalTimeout
	case errors.Is(err, sandbox.ErrInvalid):
		code = sandbox.DisposalRefused
	}
	return &sandbox.DisposalFailure{Code: code, Detail: err.Error()}
}

// Reap asks the pool to sweep sandboxes created more than olderThan ago, on every scope or
// only scope. An engine without a reaper answers with an [*sandbox.UnsupportedError].
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error) {
	req := &messages.APIReapRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIReapRequestType},
		OlderThanMS: olderThan.Milliseconds(), Scope: scope}
	var resp messages.APIReapResponse
	if err := b.do(ctx, b.cold(messages.SubjectReapT, messages.SubjectEngineReapT, &req.APIEnvelope, req, &resp, messages.APIReapResponseType)); err != nil {
		return sandbox.ReapResult{}, err
	}
	return messages.ReapFromWire(resp.APIReapResult), nil
}

// Health asks an engine of the pool (or the pinned one) how it is.
func (b *Backend) Health(ctx context.Context) (*messages.APIHealthResponse, error) {
	req := &messages.APIHealthRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIHealthRequestType}}
	var resp messages.APIHealthResponse
	if err := b.do(ctx, b.cold(messages.SubjectHealthT, messages.SubjectEngineHealthT, &req.APIEnvelope, req, &resp, messages.APIHealthResponseType)); err != nil {
		return nil, err
	}
	return &resp, nil
}
