package console

import (
	"context"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// A sandbox's sleep and snapshots on the console: its state (live, paused, stopped) follows the
// lifecycle audit events, the snapshots taken of it are listed under it, and two actions,
// pause and snapshot, are the API's calls on the engine that holds it, under the console's
// identity (an operator's).

// The lifecycle actions.
const (
	ActionPause    = "pause"    // pause on the holding engine's own subject
	ActionSnapshot = "snapshot" // snapshot on the holding engine's own subject
)

// SandboxRequest names one sandbox the console lists: its engine, handle and key.
type SandboxRequest struct {
	Engine string          `json:"engine"`
	ID     string          `json:"id"`
	Key    messages.APIKey `json:"key"`
}

// Snapshot is a snapshot the console saw taken, from its audit event.
type Snapshot struct {
	ID         string          `json:"id"`
	Key        messages.APIKey `json:"key"`
	Kind       string          `json:"kind"`
	InstanceID string          `json:"instance_id"`
	Bytes      int64           `json:"bytes"`
	Reason     string          `json:"reason"`
	Time       string          `json:"time"`
}

// Pause pauses one sandbox with a pause call to the engine that holds it, as the operator's
// act. It fails with [ErrForbidden] when NATS refuses the identity, and with an
// [*sandbox.InvalidArgumentError] for a request that does not name a listed sandbox.
func (c *Console) Pause(ctx context.Context, r SandboxRequest) (*messages.APIPauseResponse, error) {
	if err := c.checkSandbox(r, ActionPause); err != nil {
		return nil, err
	}
	if err := c.action(ctx, func(ctx context.Context) error {
		return c.remote.PauseHandle(sandbox.WithActReason(ctx, sandbox.ReasonOperator), r.Engine, r.ID, messages.KeyFromWire(&r.Key))
	}); err != nil {
		return nil, err
	}
	c.log.Info("paused from the console", zap.String("scope", r.Key.Scope), zap.String("sandbox", r.ID))
	return &messages.APIPauseResponse{}, nil
}

// Snapshot snapshots one sandbox with a snapshot call to the engine that holds it, as the
// operator's act; it fails as [Console.Pause] does.
func (c *Console) Snapshot(ctx context.Context, r SandboxRequest) (*messages.APISnapshotResponse, error) {
	if err := c.checkSandbox(r, ActionSnapshot); err != nil {
		return nil, err
	}
	var info sandbox.SnapshotInfo
	if err := c.action(ctx, func(ctx context.Context) (err error) {
		info, err = c.remote.SnapshotHandle(sandbox.WithActReason(ctx, sandbox.ReasonOperator), r.Engine, r.ID, messages.KeyFromWire(&r.Key))
		return err
	}); err != nil {
		return nil, err
	}
	c.log.Info("snapshot from the console", zap.String("scope", r.Key.Scope), zap.String("sandbox", r.ID))
	w := messages.SnapshotToWire(info)
	return &messages.APISnapshotResponse{Snapshot: &w}, nil
}

func (c *Console) checkSandbox(r SandboxRequest, action string) error {
	if r.Engine == "" || r.ID == "" || r.Key.Scope == "" {
		return &sandbox.InvalidArgumentError{Reason: "console: " + action + " names a sandbox: its engine, id and key"}
	}
	return c.allowed(action)
}

// lifecycleLocked applies a lifecycle audit event: a sleep's state to the sandbox of its
// instance, a snapshot to the list. It reports whether ev was one.
func (s *state) lifecycleLocked(ev *events.AuditEvent, key messages.APIKey) bool {
	state := ""
	switch ev.Type {
	case events.AuditSandboxPaused:
		state = messages.SandboxStatePaused
	case events.AuditSandboxStopped:
		state = messages.SandboxStateStopped
	case events.AuditSandboxWoken:
		state = messages.SandboxStateLive
	case events.AuditSnapshotTaken:
		if ev.Lifecycle != nil {
			snap := Snapshot{ID: ev.Lifecycle.Snapshot, Key: key, Kind: ev.Kind, InstanceID: ev.InstanceID,
				Bytes: ev.Lifecycle.Bytes, Reason: ev.Lifecycle.Reason, Time: ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
			s.snaps.add(snap)
			s.hub.send(update{"snapshot_taken", snap})
		}
		return true
	default:
		return false
	}
	for ref, e := range s.sandboxes {
		if e.InstanceID == ev.InstanceID && ev.InstanceID != "" {
			e.State = state
			s.sandboxes[ref] = e
			s.hub.send(update{"sandbox", e})
		}
	}
	return true
}
