package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// The backend reports what it does itself to its observer, where it happens: each command,
// file crossing and reset on its sandboxes, each egress window (pending before its proxy's
// removal, observed once the removal succeeded or found it absent) and each sweep. The router
// hands the observer over ([Backend.ReportTo]); a backend used without a router is handed one
// directly. Calls made within a larger act that its caller reports ([sandbox.WithinAct]) are
// not reported.

// observerRef holds the observer, so that it can be swapped atomically.
type observerRef struct{ obs sandbox.Observer }

var _ sandbox.Reporting = (*Backend)(nil)

// ReportTo installs obs as the observer of the backend's acts and returns the previous one;
// nil switches reporting off, and with it the reads of egress proxies before their removal
// (§3.2 step 0). It implements [sandbox.Reporting] and never fails.
func (b *Backend) ReportTo(obs sandbox.Observer) (sandbox.Observer, error) {
	var next *observerRef
	if obs != nil {
		next = &observerRef{obs}
	}
	if prev := b.obs.Swap(next); prev != nil {
		return prev.obs, nil
	}
	return nil, nil
}

// observer is the backend's observer, nil when none.
func (b *Backend) observer() sandbox.Observer {
	if r := b.obs.Load(); r != nil {
		return r.obs
	}
	return nil
}

// observing reports whether anyone hears the backend's acts: only then is a proxy read.
func (b *Backend) observing() bool { return b.obs.Load() != nil }

// deliverWindow reports a window whose proxy is gone.
func (b *Backend) deliverWindow(ctx context.Context, w sandbox.EgressWindow) {
	if obs := b.observer(); obs != nil {
		obs.EgressObserved(context.WithoutCancel(ctx), w)
	}
}

// reporter returns the observer of an act under ctx, nil when it is not reported: nobody
// hears, or the call is part of a larger act its caller reports.
func (b *Backend) reporter(ctx context.Context) sandbox.Observer {
	if sandbox.IsWithinAct(ctx) {
		return nil
	}
	return b.observer()
}

// act is the common part of an act on s, begun at start and ending with err.
func (s *Sandbox) act(start time.Time, err error) sandbox.Act {
	return sandbox.Act{Key: s.key, Kind: s.kind, Backend: BackendName, InstanceID: s.inst().id, Took: time.Since(start), Err: err}
}

// reportExec reports a command run (or refused) on s.
func (s *Sandbox) reportExec(ctx context.Context, start time.Time, cmd sandbox.Command, res sandbox.ExecResult, err error) {
	obs := s.b.reporter(ctx)
	if obs == nil {
		return
	}
	form, text := sandbox.FormShell, cmd.Shell
	if len(cmd.Argv) > 0 {
		form = sandbox.FormArgv
	}
	a := sandbox.ExecFinished{Act: s.act(start, err), Form: form}
	a.Argv0, a.CommandSHA256 = sandbox.CommandDigest(cmd.Argv, text, form)
	if err == nil {
		a.ExitCode, a.StdoutBytes, a.StderrBytes = res.ExitCode, int64(len(res.StdoutBytes)), int64(len(res.StderrBytes))
		a.NotStarted = res.NotStarted
	}
	obs.ExecFinished(ctx, a)
}

// reportFile reports a file crossing of s (content: what crossed, nil when refused).
func (s *Sandbox) reportFile(ctx context.Context, start time.Time, direction, path string, content []byte, err error) {
	obs := s.b.reporter(ctx)
	if obs == nil {
		return
	}
	a := sandbox.FileCrossed{Act: s.act(start, err), Direction: direction, Path: path}
	if err == nil {
		sum := sha256.Sum256(content)
		a.Size, a.SHA256 = int64(len(content)), hex.EncodeToString(sum[:])
	}
	obs.FileCrossed(ctx, a)
}

// reportReap reports a sweep that ran.
func (b *Backend) reportReap(ctx context.Context, start time.Time, res sandbox.ReapResult) {
	if obs := b.observer(); obs != nil {
		obs.ReapCompleted(context.WithoutCancel(ctx), sandbox.ReapCompleted{Act: sandbox.Act{Backend: BackendName, Took: time.Since(start)}, Result: res})
	}
}

// Gone reports whether the daemon no longer has the container with the given ID: an egress
// window recorded pending is published by a recovery only once its proxy is gone.
func (b *Backend) Gone(ctx context.Context, containerID string) (bool, error) {
	_, err := b.engine.Inspect(ctx, containerID)
	if isNotFound(err) {
		return true, nil
	}
	return false, err
}

// EngineID is the daemon's identity, which the events carry.
func (b *Backend) EngineID(ctx context.Context) (string, error) { return b.engine.EngineID(ctx) }
