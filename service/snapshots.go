package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
)

// Sleep and snapshots over NATS: pause and snapshot a held sandbox; restore and fork a
// snapshot (the engine that answers holds what it makes, and placement records it there);
// describe, list and delete snapshots. Who may touch a snapshot is tenancy's
// (checkSnapshotScope, tenancy.go): the scope of the sandbox it was taken of.

func pause(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APIPauseRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	p, ok := h.sandbox().(sandbox.Pausable)
	if !ok {
		return nil, &sandbox.UnsupportedError{Backend: backendName(s), Op: "Pause", Reason: "the backend cannot pause a sandbox"}
	}
	if err := p.Pause(sandbox.WithActReason(ctx, s.actReason(ctx))); err != nil {
		return nil, err
	}
	return &messages.APIPauseResponse{}, nil
}

func snapshot(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APISnapshotRequest](data)
	if err != nil {
		return nil, err
	}
	h, err := s.sandboxFor(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	sn, ok := h.sandbox().(sandbox.Snapshottable)
	if !ok {
		return nil, &sandbox.UnsupportedError{Backend: backendName(s), Op: "Snapshot", Reason: "the backend keeps no snapshots"}
	}
	info, err := sn.Snapshot(sandbox.WithActReason(ctx, s.actReason(ctx)))
	if err != nil {
		return nil, err
	}
	w := messages.SnapshotToWire(info)
	return &messages.APISnapshotResponse{Snapshot: &w}, nil
}

// actReason is operator for a call an operator made (an operator account on an engine with
// tenancy; a call that says so, messages.ReasonHeader, on a single-tenant engine), call
// otherwise.
func (s *Service) actReason(ctx context.Context) string {
	c := callOf(ctx)
	said := c != nil && c.msg.Header.Get(messages.ReasonHeader) == sandbox.ReasonOperator
	if s.callerIsOperator(ctx) || (said && s.tenancy == nil) {
		return sandbox.ReasonOperator
	}
	return sandbox.ReasonCall
}

// keeper is the router's backend as a snapshot keeper, for the calls that read the store.
func (s *Service) keeper() (sandbox.SnapshotKeeper, error) {
	k, ok := s.router.Backend().(sandbox.SnapshotKeeper)
	if !ok || !s.router.Backend().Declarations().Capabilities.Has(sandbox.SnapshotFiles) {
		return nil, &sandbox.UnsupportedError{Backend: backendName(s), Op: "snapshots", Reason: "this engine keeps no snapshots"}
	}
	return k, nil
}

// snapshotFor reads snapshot id's record and checks the caller may use its scope.
func (s *Service) snapshotFor(ctx context.Context, id string) (sandbox.SnapshotInfo, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	k, err := s.keeper()
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	info, err := k.DescribeSnapshot(ctx, id)
	if err != nil {
		return info, err
	}
	return info, s.checkSnapshotScope(ctx, info.Key.Scope)
}

func restore(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APIRestoreRequest](data)
	if err != nil {
		return nil, err
	}
	key, err := requireKey(&req.APIEnvelope)
	if err != nil {
		return nil, err
	}
	spec, err := messages.SpecFromWire(req.Spec)
	if err != nil {
		return nil, err
	}
	if _, err := s.snapshotFor(ctx, req.Snapshot); err != nil {
		return nil, err
	}
	defer s.owner.Acquiring()()
	r, here, err := s.placeHere(ctx, key, spec.Kind)
	if err != nil {
		return nil, err
	}
	if !here {
		var resp messages.APIRestoreResponse
		if err := s.relayed(ctx, messages.SubjectEngineRestoreT, r.Engine, data, &resp); err != nil {
			return nil, err
		}
		return &resp, nil
	}
	ctx = s.callContext(ctx, c, s.handles.reserver(key, spec.Kind)) // the restore's act names the handle it answers with
	sb, err := s.router.Restore(sandbox.WithActReason(ctx, s.actReason(ctx)), key, spec, req.Snapshot)
	if err != nil {
		s.owner.Abandon(r)
		return nil, err
	}
	s.transfers.forget(s.handles.drop(func(h *handle) bool { return h.key == key && h.kind == spec.Kind }))
	return &messages.APIRestoreResponse{Sandbox: s.handOut(ctx, c, key, spec, sb)}, nil
}

func fork(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APIForkRequest](data)
	if err != nil {
		return nil, err
	}
	spec, err := messages.SpecFromWire(req.Spec)
	if err != nil {
		return nil, err
	}
	keys := make([]sandbox.Key, len(req.Keys))
	for i := range req.Keys {
		if keys[i] = messages.KeyFromWire(&req.Keys[i]); keys[i].Scope == "" {
			return nil, &messages.BadRequestError{Field: "keys", Reason: "every key of a fork names a scope"}
		}
		if err := s.checkSnapshotScope(ctx, keys[i].Scope); err != nil {
			return nil, err
		}
	}
	if _, err := s.snapshotFor(ctx, req.Snapshot); err != nil {
		return nil, err
	}
	defer s.owner.Acquiring()()
	var claimed []placement.Route
	abandon := func() {
		for _, r := range claimed {
			s.owner.Abandon(r)
		}
	}
	for _, k := range keys {
		r, here, err := s.placeHere(ctx, k, spec.Kind)
		if err != nil {
			abandon()
			return nil, err
		}
		if !here {
			abandon()
			return nil, &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("%s has a sandbox of kind %q on engine %s; a fork makes new ones", k, spec.Kind, r.Engine)}
		}
		claimed = append(claimed, r)
	}
	sbs, err := s.router.Fork(sandbox.WithActReason(ctx, s.actReason(ctx)), req.Snapshot, keys, spec)
	if err != nil {
		abandon()
		return nil, err
	}
	resp := &messages.APIForkResponse{}
	for i, sb := range sbs {
		resp.Sandboxes = append(resp.Sandboxes, *s.handOut(ctx, c, keys[i], spec, sb))
	}
	return resp, nil
}

// placeHere asks placement where the key's sandbox of kind lives, claiming it here when
// nobody holds it: here false names the owner to forward to.
func (s *Service) placeHere(ctx context.Context, key sandbox.Key, kind string) (placement.Route, bool, error) {
	r, err := s.owner.Route(ctx, key, kind)
	var te *placement.TakeoverError
	switch {
	case errors.Is(err, placement.ErrLameDuck):
		return r, false, s.errLameDuck()
	case errors.As(err, &te):
		return r, false, &messages.EngineUnavailableError{Reason: te.Error() + "; try again"}
	case err != nil:
		return r, false, &messages.EngineUnavailableError{Reason: fmt.Sprintf("the placement bucket cannot be reached: %v", err)}
	}
	return r, r.Here, nil
}

// handOut records a sandbox a restore or fork made: its instance in placement, its handle,
// bound to the caller's account.
func (s *Service) handOut(ctx context.Context, c *call, key sandbox.Key, spec sandbox.Spec, sb sandbox.Sandbox) *messages.APISandbox {
	s.owner.RecordInstance(ctx, key, spec.Kind, sb.InstanceID())
	h := s.handles.put(key, spec, sb, c.callerAccount())
	out := &messages.APISandbox{ID: h.id, Engine: s.id, Kind: spec.Kind, InstanceID: sb.InstanceID(), Created: true}
	if b, ok := sb.(interface{ WorkDir() string }); ok {
		out.WorkDir = b.WorkDir()
	}
	return out
}

func snapshots(ctx context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APISnapshotsRequest](data)
	if err != nil {
		return nil, err
	}
	k, err := s.keeper()
	if err != nil {
		return nil, err
	}
	if req.Snapshot == "" {
		if req.Delete {
			return nil, &messages.BadRequestError{Field: "snapshot", Reason: "a delete names the snapshot"}
		}
		if err := s.checkSnapshotScope(ctx, req.Scope); err != nil {
			return nil, err
		}
		list, err := k.Snapshots(ctx, req.Scope, req.ThreadID)
		if err != nil {
			return nil, err
		}
		resp := &messages.APISnapshotsResponse{}
		for _, info := range list {
			resp.Snapshots = append(resp.Snapshots, messages.SnapshotToWire(info))
		}
		return resp, nil
	}
	info, err := s.snapshotFor(ctx, req.Snapshot)
	if err != nil {
		return nil, err
	}
	if req.Delete {
		return &messages.APISnapshotsResponse{}, k.DeleteSnapshot(ctx, info.ID)
	}
	return &messages.APISnapshotsResponse{Snapshots: []messages.APISnapshotInfo{messages.SnapshotToWire(info)}}, nil
}
