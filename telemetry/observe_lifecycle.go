package telemetry

import (
	"context"

	"github.com/mafsandbox/engine/sandbox"
)

// A sandbox's lifecycle acts are counted by none of the metrics.

// SandboxPaused counts nothing.
func (*Metrics) SandboxPaused(context.Context, sandbox.SandboxPaused) {}

// SandboxWoken counts nothing.
func (*Metrics) SandboxWoken(context.Context, sandbox.SandboxWoken) {}

// SandboxStopped counts nothing.
func (*Metrics) SandboxStopped(context.Context, sandbox.SandboxStopped) {}

// SnapshotTaken counts nothing.
func (*Metrics) SnapshotTaken(context.Context, sandbox.SnapshotTaken) {}

// SandboxRestored counts nothing.
func (*Metrics) SandboxRestored(context.Context, sandbox.SandboxRestored) {}

// SandboxForked counts nothing.
func (*Metrics) SandboxForked(context.Context, sandbox.SandboxForked) {}
