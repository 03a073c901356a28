package client

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

var (
	_ sandbox.Pausable       = (*Sandbox)(nil)
	_ sandbox.Snapshottable  = (*Sandbox)(nil)
	_ sandbox.SnapshotKeeper = (*Backend)(nil)
)

// Pause implements [sandbox.Pausable] on the engine that holds the sandbox.
func (s *Sandbox) Pause(ctx context.Context) error {
	req := &messages.APIPauseRequest{APIEnvelope: s.envelope(messages.APIPauseRequestType)}
	var resp messages.APIPauseResponse
	return s.b.do(ctx, s.call(messages.SubjectPauseT, &req.APIEnvelope, req, &resp, messages.APIPauseResponseType, 0))
}

// Snapshot implements [sandbox.Snapshottable] on the engine that holds the sandbox; the
// snapshot is kept where every engine of the cluster reads it.
func (s *Sandbox) Snapshot(ctx context.Context) (sandbox.SnapshotInfo, error) {
	req := &messages.APISnapshotRequest{APIEnvelope: s.envelope(messages.APISnapshotRequestType)}
	var resp messages.APISnapshotResponse
	if err := s.b.do(ctx, s.call(messages.SubjectSnapshotT, &req.APIEnvelope, req, &resp, messages.APISnapshotResponseType, 0)); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if resp.Snapshot == nil {
		return sandbox.SnapshotInfo{}, &sandbox.ProtocolError{Backend: s.b.name, Reason: "the snapshot reply names no snapshot"}
	}
	return messages.SnapshotFromWire(*resp.Snapshot), nil
}

// Restore implements [sandbox.SnapshotKeeper]: on the engine that holds the key's sandbox,
// else on any engine of the pool that has the snapshot's image.
func (b *Backend) Restore(ctx context.Context, key sandbox.Key, spec sandbox.Spec, id string) (sandbox.Sandbox, error) {
	if !spec.Valid() {
		return nil, &sandbox.InvalidArgumentError{Reason: "the spec was not built by sandbox.NewSpec"}
	}
	req := &messages.APIRestoreRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIRestoreRequestType, Key: messages.KeyToWire(key)},
		Snapshot: id, Spec: messages.SpecToWire(spec)}
	var resp messages.APIRestoreResponse
	c := b.cold(messages.SubjectRestoreT, messages.SubjectEngineRestoreT, &req.APIEnvelope, req, &resp, messages.APIRestoreResponseType)
	if engine := b.owner(key, &spec.Kind); engine != "" && b.o.engine == "" {
		pinned := c
		pinned.subject, pinned.pinned, pinned.engine = messages.Engine(messages.SubjectEngineRestoreT, b.o.prefix, engine), true, engine
		err := b.do(ctx, pinned)
		if !errors.Is(err, messages.ErrUnavailable) {
			return b.acquired(key, spec, &messages.APIAcquireResponse{Sandbox: resp.Sandbox}, err)
		}
		b.log.Debug("the engine that served the key is gone; asking the pool", zap.String("engine", engine), zap.String("key", key.String()))
	}
	err := b.do(ctx, c)
	return b.acquired(key, spec, &messages.APIAcquireResponse{Sandbox: resp.Sandbox}, err)
}

// Fork implements [sandbox.SnapshotKeeper]: one engine of the pool makes every sandbox.
func (b *Backend) Fork(ctx context.Context, id string, keys []sandbox.Key, spec sandbox.Spec) ([]sandbox.Sandbox, error) {
	if !spec.Valid() {
		return nil, &sandbox.InvalidArgumentError{Reason: "the spec was not built by sandbox.NewSpec"}
	}
	req := &messages.APIForkRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIForkRequestType}, Snapshot: id, Spec: messages.SpecToWire(spec)}
	for _, k := range keys {
		req.Keys = append(req.Keys, *messages.KeyToWire(k))
	}
	var resp messages.APIForkResponse
	if err := b.do(ctx, b.cold(messages.SubjectForkT, messages.SubjectEngineForkT, &req.APIEnvelope, req, &resp, messages.APIForkResponseType)); err != nil {
		return nil, err
	}
	if len(resp.Sandboxes) != len(keys) {
		return nil, &sandbox.ProtocolError{Backend: b.name, Reason: "the fork reply does not name one sandbox per key"}
	}
	out := make([]sandbox.Sandbox, len(keys))
	for i := range keys {
		sb, err := b.acquired(keys[i], spec, &messages.APIAcquireResponse{Sandbox: &resp.Sandboxes[i]}, nil)
		if err != nil {
			return nil, err
		}
		out[i] = sb
	}
	return out, nil
}

// DescribeSnapshot implements [sandbox.SnapshotKeeper].
func (b *Backend) DescribeSnapshot(ctx context.Context, id string) (sandbox.SnapshotInfo, error) {
	list, err := b.snapshots(ctx, messages.APISnapshotsRequest{Snapshot: id})
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if len(list) != 1 {
		return sandbox.SnapshotInfo{}, &sandbox.ProtocolError{Backend: b.name, Reason: "the snapshots reply does not describe one snapshot"}
	}
	return list[0], nil
}

// Snapshots implements [sandbox.SnapshotKeeper].
func (b *Backend) Snapshots(ctx context.Context, scope, threadID string) ([]sandbox.SnapshotInfo, error) {
	return b.snapshots(ctx, messages.APISnapshotsRequest{Scope: scope, ThreadID: threadID})
}

// DeleteSnapshot implements [sandbox.SnapshotKeeper].
func (b *Backend) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := b.snapshots(ctx, messages.APISnapshotsRequest{Snapshot: id, Delete: true})
	return err
}

func (b *Backend) snapshots(ctx context.Context, req messages.APISnapshotsRequest) ([]sandbox.SnapshotInfo, error) {
	req.APIEnvelope = messages.APIEnvelope{Type: messages.APISnapshotsRequestType}
	var resp messages.APISnapshotsResponse
	if err := b.do(ctx, b.cold(messages.SubjectSnapshotsT, messages.SubjectEngineSnapshotsT, &req.APIEnvelope, &req, &resp, messages.APISnapshotsResponseType)); err != nil {
		return nil, err
	}
	out := make([]sandbox.SnapshotInfo, 0, len(resp.Snapshots))
	for _, w := range resp.Snapshots {
		out = append(out, messages.SnapshotFromWire(w))
	}
	return out, nil
}

// PauseHandle pauses the sandbox with handle id on engine, as an inventory lists it (an
// operator's call: the console's).
func (b *Backend) PauseHandle(ctx context.Context, engine, id string, key sandbox.Key) error {
	return (&Sandbox{b: b, id: id, engine: engine, key: key}).Pause(ctx)
}

// SnapshotHandle snapshots the sandbox with handle id on engine, as an inventory lists it.
func (b *Backend) SnapshotHandle(ctx context.Context, engine, id string, key sandbox.Key) (sandbox.SnapshotInfo, error) {
	return (&Sandbox{b: b, id: id, engine: engine, key: key}).Snapshot(ctx)
}
