package sandbox

import "context"

// The lifecycle acts through [Observers] and the router's guard.

func (s observerSet) SandboxPaused(ctx context.Context, a SandboxPaused) {
	for _, o := range s {
		o.SandboxPaused(ctx, a)
	}
}

func (s observerSet) SandboxWoken(ctx context.Context, a SandboxWoken) {
	for _, o := range s {
		o.SandboxWoken(ctx, a)
	}
}

func (s observerSet) SandboxStopped(ctx context.Context, a SandboxStopped) {
	for _, o := range s {
		o.SandboxStopped(ctx, a)
	}
}

func (s observerSet) SnapshotTaken(ctx context.Context, a SnapshotTaken) {
	for _, o := range s {
		o.SnapshotTaken(ctx, a)
	}
}

func (s observerSet) SandboxRestored(ctx context.Context, a SandboxRestored) {
	for _, o := range s {
		o.SandboxRestored(ctx, a)
	}
}

func (s observerSet) SandboxForked(ctx context.Context, a SandboxForked) {
	for _, o := range s {
		o.SandboxForked(ctx, a)
	}
}

func (g guarded) SandboxPaused(ctx context.Context, a SandboxPaused) {
	defer g.contain("SandboxPaused")
	g.obs.SandboxPaused(ctx, a)
}

func (g guarded) SandboxWoken(ctx context.Context, a SandboxWoken) {
	defer g.contain("SandboxWoken")
	g.obs.SandboxWoken(ctx, a)
}

func (g guarded) SandboxStopped(ctx context.Context, a SandboxStopped) {
	defer g.contain("SandboxStopped")
	g.obs.SandboxStopped(ctx, a)
}

func (g guarded) SnapshotTaken(ctx context.Context, a SnapshotTaken) {
	defer g.contain("SnapshotTaken")
	g.obs.SnapshotTaken(ctx, a)
}

func (g guarded) SandboxRestored(ctx context.Context, a SandboxRestored) {
	defer g.contain("SandboxRestored")
	g.obs.SandboxRestored(ctx, a)
}

func (g guarded) SandboxForked(ctx context.Context, a SandboxForked) {
	defer g.contain("SandboxForked")
	g.obs.SandboxForked(ctx, a)
}
