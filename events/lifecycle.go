package events

import (
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// The sandboxes' lifecycle acts on the audit stream: every act the backend reports to its
// lifecycle observer (sandbox.LifecycleObserver; actors.WithLifecycleObserver) is one audit
// event here, with its reason (idle, call, operator). This file is the whole mapping.

// Audit event types of the lifecycle acts.
const (
	AuditSandboxPaused   = "sandbox.paused"   // processes frozen, kept: idle, or an operator's
	AuditSandboxWoken    = "sandbox.woken"    // run again: from paused (processes kept) or stopped (not kept)
	AuditSandboxStopped  = "sandbox.stopped"  // processes ended, files kept
	AuditSnapshotTaken   = "snapshot.taken"   // a sandbox's filesystem recorded
	AuditSandboxRestored = "sandbox.restored" // a new instance from a snapshot in the key's place
	AuditSandboxForked   = "sandbox.forked"   // new sandboxes for new keys from one snapshot
)

// AuditLifecycle is a lifecycle act's detail.
type AuditLifecycle struct {
	Reason        string     `json:"reason"`                  // idle, call or operator
	IdleMS        int64      `json:"idleMs,omitempty"`        // paused, stopped: since the last call
	SleptMS       int64      `json:"sleptMs,omitempty"`       // woken: how long, when the engine that put it to sleep woke it
	From          string     `json:"from,omitempty"`          // woken: paused or stopped
	ProcessesKept *bool      `json:"processesKept,omitempty"` // woken: false when it was started again
	Snapshot      string     `json:"snapshot,omitempty"`      // snapshot, restored, forked: the snapshot's ID
	Image         string     `json:"image,omitempty"`         // snapshot: the image digest it is relative to
	Layer         string     `json:"layer,omitempty"`         // snapshot: its layer's digest
	Bytes         int64      `json:"bytes,omitempty"`         // snapshot: its layer's size
	Replaced      string     `json:"replaced,omitempty"`      // restored: the instance it replaced
	Keys          []EventKey `json:"keys,omitempty"`          // forked: the new sandboxes' keys
	Instances     []string   `json:"instances,omitempty"`     // forked: their instances, in order
}

// Lifecycle is the lifecycle observer to give the backend (actors.WithLifecycleObserver): each
// act an audit event on the audit outbox, never blocking the act.
func (e *Events) Lifecycle() sandbox.LifecycleObserver { return lifecycleAudit{sink: e.Audit()} }

type lifecycleAudit struct {
	sandbox.NopObserver
	sink *AuditSink
}

func eventKey(k sandbox.Key) *EventKey {
	if k == (sandbox.Key{}) {
		return nil
	}
	return &EventKey{Scope: k.Scope, ThreadID: k.ThreadID, AgentID: k.AgentID, CallID: k.CallID}
}

func (l lifecycleAudit) record(typ string, key sandbox.Key, kind, instance string, took time.Duration, d *AuditLifecycle) {
	l.sink.Record(AuditEvent{Type: typ, Key: eventKey(key), Kind: kind, InstanceID: instance, Outcome: OutcomeOK,
		DurationMS: float64(took.Microseconds()) / 1000, Lifecycle: d})
}

func (l lifecycleAudit) SandboxPaused(ev sandbox.SandboxPaused) {
	l.record(AuditSandboxPaused, ev.Key, ev.Kind, ev.InstanceID, 0, &AuditLifecycle{Reason: ev.Reason, IdleMS: ev.IdleFor.Milliseconds()})
}

func (l lifecycleAudit) SandboxStopped(ev sandbox.SandboxStopped) {
	l.record(AuditSandboxStopped, ev.Key, ev.Kind, ev.InstanceID, 0, &AuditLifecycle{Reason: ev.Reason, IdleMS: ev.IdleFor.Milliseconds()})
}

func (l lifecycleAudit) SandboxWoken(ev sandbox.SandboxWoken) {
	kept := ev.ProcessesKept
	l.record(AuditSandboxWoken, ev.Key, ev.Kind, ev.InstanceID, 0, &AuditLifecycle{Reason: ev.Reason, From: ev.From,
		ProcessesKept: &kept, SleptMS: ev.SleptFor.Milliseconds()})
}

func (l lifecycleAudit) SnapshotTaken(ev sandbox.SnapshotTaken) {
	s := ev.Snapshot
	l.record(AuditSnapshotTaken, s.Key, s.Kind, s.InstanceID, seconds(ev.Seconds), &AuditLifecycle{Reason: s.Reason,
		Snapshot: s.ID, Image: s.Image, Layer: s.Layer, Bytes: s.Bytes})
}

func (l lifecycleAudit) SandboxRestored(ev sandbox.SandboxRestored) {
	l.record(AuditSandboxRestored, ev.Key, ev.Kind, ev.InstanceID, seconds(ev.Seconds), &AuditLifecycle{Reason: ev.Reason,
		Snapshot: ev.Snapshot, Replaced: ev.Replaced})
}

func (l lifecycleAudit) SandboxForked(ev sandbox.SandboxForked) {
	d := &AuditLifecycle{Reason: ev.Reason, Snapshot: ev.Snapshot, Instances: ev.Instances}
	var scope sandbox.Key
	for _, k := range ev.Keys {
		d.Keys = append(d.Keys, *eventKey(k))
		scope = sandbox.Key{Scope: k.Scope, ThreadID: k.ThreadID}
	}
	l.record(AuditSandboxForked, scope, ev.Kind, "", seconds(ev.Seconds), d)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
