package messages

import (
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// Sleep and snapshots on the wire: pause and snapshot a sandbox the engine holds (its
// subjects); restore and fork a snapshot on any engine of the pool that has its image, which
// then holds what it made; describe, list and delete snapshots on any engine (the store is the
// cluster's). docs/nats-api.md, "Sleep and snapshots".

// Subjects of sleep and snapshots.
const (
	// SubjectPause pauses a sandbox now (an operator's sleep); the next call that needs it
	// running wakes it. APIPauseRequest → APIPauseResponse; no queue group.
	SubjectPause  = DefaultPrefix + ".v1.engine.*.pause"
	SubjectPauseT = "%s.v1.engine.%s.pause"
	// SubjectSnapshot records a sandbox's filesystem as a snapshot.
	// APISnapshotRequest → APISnapshotResponse; no queue group.
	SubjectSnapshot  = DefaultPrefix + ".v1.engine.*.snapshot"
	SubjectSnapshotT = "%s.v1.engine.%s.snapshot"
	// SubjectRestore puts the key's sandbox back to a snapshot, on any engine of the pool.
	// APIRestoreRequest → APIRestoreResponse; queue group QueueGroup.
	SubjectRestore  = DefaultPrefix + ".v1.restore"
	SubjectRestoreT = "%s.v1.restore"
	// SubjectEngineRestore restores on one engine. APIRestoreRequest → APIRestoreResponse.
	SubjectEngineRestore  = DefaultPrefix + ".v1.engine.*.restore"
	SubjectEngineRestoreT = "%s.v1.engine.%s.restore"
	// SubjectFork makes new sandboxes from a snapshot, on any engine of the pool.
	// APIForkRequest → APIForkResponse; queue group QueueGroup.
	SubjectFork  = DefaultPrefix + ".v1.fork"
	SubjectForkT = "%s.v1.fork"
	// SubjectEngineFork forks on one engine. APIForkRequest → APIForkResponse.
	SubjectEngineFork  = DefaultPrefix + ".v1.engine.*.fork"
	SubjectEngineForkT = "%s.v1.engine.%s.fork"
	// SubjectSnapshots describes one snapshot, lists a conversation's, or deletes one.
	// APISnapshotsRequest → APISnapshotsResponse; queue group QueueGroup.
	SubjectSnapshots  = DefaultPrefix + ".v1.snapshots"
	SubjectSnapshotsT = "%s.v1.snapshots"
	// SubjectEngineSnapshots asks one engine. APISnapshotsRequest → APISnapshotsResponse.
	SubjectEngineSnapshots  = DefaultPrefix + ".v1.engine.*.snapshots"
	SubjectEngineSnapshotsT = "%s.v1.engine.%s.snapshots"
)

// Message types of sleep and snapshots.
const (
	APIPauseRequestType      = APITypePrefix + "pause_request"
	APIPauseResponseType     = APITypePrefix + "pause_response"
	APISnapshotRequestType   = APITypePrefix + "snapshot_request"
	APISnapshotResponseType  = APITypePrefix + "snapshot_response"
	APIRestoreRequestType    = APITypePrefix + "restore_request"
	APIRestoreResponseType   = APITypePrefix + "restore_response"
	APIForkRequestType       = APITypePrefix + "fork_request"
	APIForkResponseType      = APITypePrefix + "fork_response"
	APISnapshotsRequestType  = APITypePrefix + "snapshots_request"
	APISnapshotsResponseType = APITypePrefix + "snapshots_response"
)

// APIPauseRequest pauses the envelope's sandbox.
type APIPauseRequest struct {
	APIEnvelope
}

// APIPauseResponse is empty on success.
type APIPauseResponse struct {
	APIResponse
}

// APISnapshotRequest records the envelope's sandbox's filesystem.
type APISnapshotRequest struct {
	APIEnvelope
}

// APISnapshotResponse carries the snapshot made.
type APISnapshotResponse struct {
	APIResponse
	Snapshot *APISnapshotInfo `json:"snapshot,omitempty"`
}

// APIRestoreRequest puts the envelope key's sandbox of spec's kind back to snapshot: a new
// instance, from that snapshot, in its place (or the key's first).
type APIRestoreRequest struct {
	APIEnvelope
	Snapshot string  `json:"snapshot"`
	Spec     APISpec `json:"spec"`
}

// APIRestoreResponse carries the new sandbox's handle, served by the engine that restored.
type APIRestoreResponse struct {
	APIResponse
	Sandbox *APISandbox `json:"sandbox,omitempty"`
}

// APIForkRequest makes one sandbox of spec for each key, each from snapshot.
type APIForkRequest struct {
	APIEnvelope
	Snapshot string   `json:"snapshot"`
	Keys     []APIKey `json:"keys"`
	Spec     APISpec  `json:"spec"`
}

// APIForkResponse carries the new sandboxes' handles, in the order of the keys.
type APIForkResponse struct {
	APIResponse
	Sandboxes []APISandbox `json:"sandboxes,omitempty"`
}

// APISnapshotsRequest describes one snapshot (snapshot set), lists those of a conversation
// (scope and thread_id), or deletes one (snapshot set, delete true).
type APISnapshotsRequest struct {
	APIEnvelope
	Snapshot string `json:"snapshot,omitempty"`
	Scope    string `json:"scope,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
	Delete   bool   `json:"delete,omitempty"`
}

// APISnapshotsResponse carries the snapshots described or listed (none for a delete).
type APISnapshotsResponse struct {
	APIResponse
	Snapshots []APISnapshotInfo `json:"snapshots,omitempty"`
}

// APISnapshotInfo is sandbox.SnapshotInfo on the wire.
type APISnapshotInfo struct {
	ID         string `json:"id"`
	Key        APIKey `json:"key"`
	Kind       string `json:"kind"`
	Backend    string `json:"backend"`
	InstanceID string `json:"instance_id"`
	Image      string `json:"image"`
	Layer      string `json:"layer"`
	Bytes      int64  `json:"bytes"`
	Entries    int    `json:"entries"`
	Created    string `json:"created"` // RFC 3339, UTC
	Reason     string `json:"reason,omitempty"`
}

// SnapshotToWire describes s on the wire.
func SnapshotToWire(s sandbox.SnapshotInfo) APISnapshotInfo {
	return APISnapshotInfo{ID: s.ID, Key: *KeyToWire(s.Key), Kind: s.Kind, Backend: s.Backend, InstanceID: s.InstanceID,
		Image: s.Image, Layer: s.Layer, Bytes: s.Bytes, Entries: s.Entries, Created: s.Created.UTC().Format(time.RFC3339Nano), Reason: s.Reason}
}

// SnapshotFromWire is [SnapshotToWire]'s inverse; an unreadable time is zero.
func SnapshotFromWire(w APISnapshotInfo) sandbox.SnapshotInfo {
	created, _ := time.Parse(time.RFC3339Nano, w.Created)
	return sandbox.SnapshotInfo{ID: w.ID, Key: KeyFromWire(&w.Key), Kind: w.Kind, Backend: w.Backend, InstanceID: w.InstanceID,
		Image: w.Image, Layer: w.Layer, Bytes: w.Bytes, Entries: w.Entries, Created: created, Reason: w.Reason}
}
