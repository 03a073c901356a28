package events

import (
	"context"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// The sandboxes' lifecycle acts on the audit stream: every sleep and snapshot act the backend
// reports (sandbox.SandboxPaused … SandboxForked) is one audit event, with its reason (idle,
// call, operator). This file is the whole mapping of those acts.

// Audit event types of the lifecycle acts.
const (
	AuditSandboxPaused   = "sandbox.paused"   // processes frozen, kept: idle, or asked for
	AuditSandboxWoken    = "sandbox.woken"    // run again: from paused (processes kept) or stopped (not kept)
	AuditSandboxStopped  = "sandbox.stopped"  // processes ended, files kept
	AuditSnapshotTaken   = "snapshot.taken"   // a sandbox's filesystem recorded
	AuditSandboxRestored = "sandbox.restored" // a new instance from a snapshot in the key's place
	AuditSandboxForked   = "sandbox.forked"   // new sandboxes for new keys from one snapshot
)

// AuditLifecycle is a lifecycle act's detail.
type AuditLifecycle struct {
	Reason        string            `json:"reason"`                   // idle, call or operator
	IdleMS        int64             `json:"idle_ms,omitempty"`        // paused, stopped: since the last call
	SleptMS       int64             `json:"slept_ms,omitempty"`       // woken: how long, when the engine that put it to sleep woke it
	From          string            `json:"from,omitempty"`           // woken: paused or stopped
	ProcessesKept *bool             `json:"processes_kept,omitempty"` // woken: false when it was started again
	Snapshot      string            `json:"snapshot,omitempty"`       // snapshot, restored, forked: the snapshot's ID
	Image         string            `json:"image,omitempty"`          // snapshot: the image digest it is relative to
	Layer         string            `json:"layer,omitempty"`          // snapshot: its layer's digest
	Bytes         int64             `json:"bytes,omitempty"`          // snapshot: its layer's size
	Replaced      string            `json:"replaced,omitempty"`       // restored, reset: the instance it replaced
	Keys          []messages.APIKey `json:"keys,omitempty"`           // forked: the new sandboxes' keys
	Instances     []string          `json:"instances,omitempty"`      // forked: their instances, in order
}

// SandboxPaused records a pause.
func (e *Events) SandboxPaused(ctx context.Context, a sandbox.SandboxPaused) {
	e.lifecycle(ctx, AuditSandboxPaused, a.Act, &AuditLifecycle{Reason: a.Reason, IdleMS: a.IdleFor.Milliseconds()})
}

// SandboxStopped records a stop.
func (e *Events) SandboxStopped(ctx context.Context, a sandbox.SandboxStopped) {
	e.lifecycle(ctx, AuditSandboxStopped, a.Act, &AuditLifecycle{Reason: a.Reason, IdleMS: a.IdleFor.Milliseconds()})
}

// SandboxWoken records a wake.
func (e *Events) SandboxWoken(ctx context.Context, a sandbox.SandboxWoken) {
	kept := a.ProcessesKept
	e.lifecycle(ctx, AuditSandboxWoken, a.Act, &AuditLifecycle{Reason: a.Reason, From: a.From, ProcessesKept: &kept,
		SleptMS: a.SleptFor.Milliseconds()})
}

// SnapshotTaken records a snapshot.
func (e *Events) SnapshotTaken(ctx context.Context, a sandbox.SnapshotTaken) {
	s := a.Snapshot
	e.lifecycle(ctx, AuditSnapshotTaken, a.Act, &AuditLifecycle{Reason: s.Reason, Snapshot: s.ID, Image: s.Image, Layer: s.Layer, Bytes: s.Bytes})
}

// SandboxRestored records a restore.
func (e *Events) SandboxRestored(ctx context.Context, a sandbox.SandboxRestored) {
	e.lifecycle(ctx, AuditSandboxRestored, a.Act, &AuditLifecycle{Reason: a.Reason, Snapshot: a.Snapshot, Replaced: a.Replaced})
}

// SandboxForked records a fork.
func (e *Events) SandboxForked(ctx context.Context, a sandbox.SandboxForked) {
	d := &AuditLifecycle{Reason: a.Reason, Snapshot: a.Snapshot, Instances: a.Instances}
	for _, k := range a.Keys {
		d.Keys = append(d.Keys, *messages.KeyToWire(k))
	}
	e.lifecycle(ctx, AuditSandboxForked, a.Act, d)
}

func (e *Events) lifecycle(ctx context.Context, typ string, a sandbox.Act, d *AuditLifecycle) {
	ev := auditOf(ctx, typ, a)
	ev.Lifecycle = d
	e.audit.Record(ev)
}
