package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// A dispose or scope purge ends the placement entries of the sandboxes it names, wherever it
// landed, and their owners learn of it (docs/architecture.md, "Over NATS"). Of the entries the
// call names:
//
//   - one another engine owns, its lease live, is that engine's to dispose: the call is
//     forwarded to the owner's own subject, as an acquire is, and the owner removes the
//     sandbox, drops its handles (its health and members counts follow) and releases the
//     entry, as for a call it got itself.
//   - one whose owner lapsed is claimed first — taken over, as an acquire would — and one of
//     this engine's own that it no longer holds (a restart under the same ID) renewed, so the
//     local dispose that follows releases it like any lease of this engine's. The owner
//     component does this sorting ([placement.Owner.ClaimKeyEntries]); the forwards are
//     the service's.
//
// A live owner that does not answer, or answers with an error, stops the call before it
// touches anything here: only the owner may touch its sandbox, and it may be cut off from
// NATS but not from its daemon. The caller is told (unreachable, until the owner's lease
// lapses) and disposes again. A call that was itself forwarded is served where it landed.

// placedDispose does the above for a dispose of key (req.Kind, or every kind). It returns the
// failures to report and whether the local dispose is to follow: not when it must stop, nor
// when the one kind asked was the owner's to dispose and it did.
func (s *Service) placedDispose(ctx context.Context, req *messages.APIDisposeRequest, key sandbox.Key) (failures []sandbox.DisposalFailure, local bool) {
	if s.unplaced(ctx) {
		return nil, true
	}
	owned, err := s.owner.ClaimKeyEntries(ctx, key, req.Kind)
	if err != nil {
		return notDisposed(err), false
	}
	for _, e := range owned {
		one := *req
		one.Kind = &e.Kind
		var resp messages.APIDisposeResponse
		if f := s.forwardDisposal(ctx, messages.SubjectEngineDisposeT, e.Record.Engine, &one, &resp); f != nil {
			return append(failures, *f), false
		}
		if f := messages.FailureFromWire(resp.Undisposed); f != nil {
			failures = append(failures, *f)
		}
	}
	return failures, req.Kind == nil || len(owned) == 0
}

// placedDisposeScope does the above for a purge of (scope, thread): the purge goes, unchanged,
// to every other live owner of one of the conversation's sandboxes. It returns the failures to
// report, the sandboxes the owners disposed, and whether the local purge is to follow.
func (s *Service) placedDisposeScope(ctx context.Context, req *messages.APIDisposeScopeRequest, scope, thread string) (failures []sandbox.DisposalFailure, disposed int, local bool) {
	if s.unplaced(ctx) {
		return nil, 0, true
	}
	owned, err := s.owner.ClaimScopeEntries(ctx, scope, thread)
	if err != nil {
		return notDisposed(err), 0, false
	}
	done := map[string]bool{}
	for _, e := range owned {
		owner := e.Record.Engine
		if done[owner] {
			continue
		}
		done[owner] = true
		var resp messages.APIDisposeScopeResponse
		if f := s.forwardDisposal(ctx, messages.SubjectEngineDisposeScopeT, owner, req, &resp); f != nil {
			return append(failures, *f), disposed, false
		}
		disposed += resp.Disposed
		if f := messages.FailureFromWire(resp.Undisposed); f != nil {
			failures = append(failures, *f)
		}
	}
	return failures, disposed, true
}

// unplaced reports a call whose entries are not this engine's to sort: without placement, or
// forwarded here by another engine, which sorted them.
func (s *Service) unplaced(ctx context.Context) bool {
	c := callOf(ctx)
	return !s.owner.Placed() || c == nil || c.msg.Header.Get(ForwardedHeader) != ""
}

// notDisposed is the failure of a call that stopped before it disposed anything, because the
// entries it names could not be read or taken over.
func notDisposed(err error) []sandbox.DisposalFailure {
	return []sandbox.DisposalFailure{{Code: sandbox.DisposalUnreachable, Detail: fmt.Sprintf("nothing was disposed: %v", err)}}
}

// forwardDisposal sends req to owner's own subject of subjectT and decodes the reply into resp.
// It returns a failure when the owner did not answer or answered with an error, nil when resp
// holds its answer.
func (s *Service) forwardDisposal(ctx context.Context, subjectT, owner string, req, resp any) *sandbox.DisposalFailure {
	data, err := json.Marshal(req)
	if err == nil {
		err = s.relayed(ctx, subjectT, owner, data, resp)
	}
	if err == nil {
		s.log.Debug("forwarded a disposal to the owner", zap.String("owner", owner), zap.String("subject", subjectT))
		return nil
	}
	code := sandbox.DisposalUnknown
	switch {
	case errors.Is(err, messages.ErrUnavailable):
		code = sandbox.DisposalUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		code = sandbox.DisposalTimeout
	case errors.Is(err, sandbox.ErrRefused): // the owner refused the caller (forbidden, tenancy.go)
		code = sandbox.DisposalRefused
	}
	return &sandbox.DisposalFailure{Code: code, Detail: fmt.Sprintf("a sandbox named is engine %s's to dispose: %v", owner, err)}
}
