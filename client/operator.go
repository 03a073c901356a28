package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The operator's calls: what a tool watching and steering a pool (the console) asks, each
// answering with the call's typed error where the protocol's [Backend.Dispose] folds it into a
// disposal failure. A client built for them alone needs no engine at construction
// ([WithoutDeclarations]).

// WithoutDeclarations builds a client that reads nothing of the pool at [New]: it makes the
// operator's calls (disposals, purges, reaps, health, inventories, lame duck, probes, the
// engine list) and acquires nothing ([Backend.Acquire] fails with an
// [*sandbox.UnsupportedError]). For a tool that starts before the pool's engines do.
func WithoutDeclarations() Option {
	return func(o *options) error { o.noDeclarations = true; return nil }
}

// DisposeChecked is [Backend.Dispose] answering a call it could not make with that call's
// error instead of a failure: an [*messages.ForbiddenError] when the engine's tenancy refuses
// the caller, an [*messages.EngineUnavailableError] when no engine answered. A disposal that
// ran answers what may remain.
func (b *Backend) DisposeChecked(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) (*sandbox.DisposalFailure, error) {
	req := &messages.APIDisposeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeRequestType, Key: messages.KeyToWire(key)},
		Kind: opts.Kind, InstanceID: opts.InstanceID}
	var resp messages.APIDisposeResponse
	if err := b.do(ctx, b.cold(messages.SubjectDisposeT, messages.SubjectEngineDisposeT, &req.APIEnvelope, req, &resp,
		messages.APIDisposeResponseType)); err != nil {
		return nil, err
	}
	return messages.FailureFromWire(resp.Undisposed), nil
}

// DisposeScopeChecked is [Backend.DisposeScope] answering a call it could not make with that
// call's error, as [Backend.DisposeChecked] does.
func (b *Backend) DisposeScopeChecked(ctx context.Context, scope, threadID string) (sandbox.ScopePurge, error) {
	req := &messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType,
		Key: &messages.APIKey{Scope: scope, ThreadID: threadID}}}
	var resp messages.APIDisposeScopeResponse
	if err := b.do(ctx, b.cold(messages.SubjectDisposeScopeT, messages.SubjectEngineDisposeScopeT, &req.APIEnvelope, req, &resp,
		messages.APIDisposeScopeResponseType)); err != nil {
		return sandbox.ScopePurge{}, err
	}
	return sandbox.ScopePurge{Disposed: resp.Disposed, Undisposed: messages.FailureFromWire(resp.Undisposed)}, nil
}

// EngineHealth asks one engine how it is, on its own subject; it fails with an
// [*messages.EngineUnavailableError] when that engine does not answer.
func (b *Backend) EngineHealth(ctx context.Context, engine string) (*messages.APIHealthResponse, error) {
	if engine == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "engine health: name an engine"}
	}
	req := &messages.APIHealthRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIHealthRequestType}}
	var resp messages.APIHealthResponse
	c := call{subject: messages.Engine(messages.SubjectEngineHealthT, b.o.prefix, engine), env: &req.APIEnvelope, req: req,
		resp: &resp, respType: messages.APIHealthResponseType, pinned: true, engine: engine, repeatable: true}
	if err := b.do(ctx, c); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Operations an operator probes ([Backend.Probe]).
const (
	ProbeDispose      = "dispose"
	ProbeDisposeScope = "dispose_scope"
	ProbeLameDuck     = "lame_duck" // on an engine's own subject only
)

// probes are the subjects and request types of the operations [Backend.Probe] knows.
var probes = map[string]struct{ shared, engine, reqType string }{
	ProbeDispose:      {messages.SubjectDisposeT, messages.SubjectEngineDisposeT, messages.APIDisposeRequestType},
	ProbeDisposeScope: {messages.SubjectDisposeScopeT, messages.SubjectEngineDisposeScopeT, messages.APIDisposeScopeRequestType},
	ProbeLameDuck:     {"", messages.SubjectEngineLameDuckT, messages.APILameDuckRequestType},
}

// probeField is the field of a probe that no engine knows, so that every engine refuses the
// probe as a bad request before it acts.
const probeField = "maf_sandbox_probe"

// Probe asks whether an engine takes op from this client, without doing it: it sends op's
// request, on the pool's shared subject (engine "") or on engine's own, with a field every
// engine refuses as a bad request before it acts. nil: an engine answered, so the NATS server
// delivers op from this identity. It fails with an [*messages.EngineUnavailableError] when no
// engine answered — none serves the subject, or the server dropped the request (a permissions
// violation on the connection says so) — and with an [*sandbox.InvalidArgumentError] for an
// operation it does not know or one with no shared subject and no engine named.
func (b *Backend) Probe(ctx context.Context, op, engine string) error {
	p, ok := probes[op]
	var subject string
	switch {
	case !ok:
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("probe: unknown operation %q", op)}
	case engine != "":
		subject = messages.Engine(p.engine, b.o.prefix, engine)
	case p.shared != "":
		subject = messages.Shared(p.shared, b.o.prefix)
	default:
		return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("probe: %s has no shared subject; name an engine", op)}
	}
	req := map[string]any{"type": p.reqType, probeField: true}
	var resp messages.APIResponse
	err := b.do(ctx, call{subject: subject, req: req, resp: &resp, pinned: engine != "", engine: engine})
	var bad *messages.BadRequestError
	if errors.As(err, &bad) {
		return nil // the answer a probe is built to get
	}
	return err
}

// EngineStats is what an engine of the pool says of itself on the micro protocol's
// $SRV.STATS: its ID, version and start, and the requests its endpoints answered.
type EngineStats struct {
	ID        string
	Version   string
	StartedAt time.Time
	Requests  int
	// Errors are the calls that failed for the engine's own reasons; Refused the rest of the
	// calls answered with an error (a caller's bad request, a refusal, a permission probe). An
	// engine that does not set them apart counts every error as its own.
	Errors  int
	Refused int
}

// Engines asks the pool's engines under this client's prefix for their stats and returns
// those that answered within wait.
func (b *Backend) Engines(ctx context.Context, wait time.Duration) ([]EngineStats, error) {
	inbox := b.nc.NewInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("engines: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := b.nc.PublishRequest("$SRV.STATS."+messages.ServiceName, inbox, nil); err != nil {
		return nil, fmt.Errorf("engines: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []EngineStats
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			return out, nil // the wait is over
		}
		var st struct {
			ID        string            `json:"id"`
			Version   string            `json:"version"`
			Started   time.Time         `json:"started"`
			Metadata  map[string]string `json:"metadata"`
			Endpoints []struct {
				NumRequests int                         `json:"num_requests"`
				NumErrors   int                         `json:"num_errors"`
				Data        *messages.EndpointStatsData `json:"data"`
			} `json:"endpoints"`
		}
		if json.Unmarshal(m.Data, &st) != nil || st.Metadata["prefix"] != b.o.prefix || !messages.ValidToken(st.ID) {
			continue
		}
		e := EngineStats{ID: st.ID, Version: st.Version, StartedAt: st.Started}
		for _, ep := range st.Endpoints {
			failures := ep.NumErrors
			if ep.Data != nil {
				failures = ep.Data.EngineFailures
			}
			e.Requests += ep.NumRequests
			e.Errors += failures
			e.Refused += ep.NumErrors - failures
		}
		out = append(out, e)
	}
}
