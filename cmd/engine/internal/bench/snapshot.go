package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/sandbox"
)

// snapshotRows is the group "snapshot", on one engine and a directory store (the rows over
// NATS are --cluster's, cluster.go): snapshot_100mib_local, a snapshot of a sandbox that wrote
// 100 MiB; fork_8_local, one snapshot forked into 8 new sandboxes, each running when the fork
// returns; restore_same_engine_50mib, a 50 MiB snapshot restored in place. The snapshot image
// a fork or restore loads is loaded by the warm-up.
func (r *runner) snapshotRows(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	if !r.b.Declarations().Capabilities.Has(sandbox.SnapshotFiles) {
		report(Row{Op: "snapshot", Note: "skipped: the backend keeps no snapshots"})
		return nil
	}
	key := r.key("snapshot")
	sb, err := r.b.Acquire(ctx, key, files)
	if err != nil {
		return err
	}
	if err := r.sh(ctx, sb, "mkdir -p /data && dd if=/dev/urandom of=/data/big bs=1M count=100 2>/dev/null"); err != nil {
		return err
	}
	reps := min(r.cfg.Reps, 5) // 100 MiB a rep
	var snap sandbox.SnapshotInfo
	drop := func() error {
		if snap.ID != "" {
			return r.b.DeleteSnapshot(ctx, snap.ID)
		}
		return nil
	}
	row, err := r.timeN(ctx, "snapshot_100mib_local", reps, drop, func() error {
		var err error
		snap, err = sb.(sandbox.Snapshottable).Snapshot(ctx)
		return err
	})
	if err != nil {
		return err
	}
	row.Note = fmt.Sprintf("a running sandbox frozen, its changes read and stored: %d MiB layer", snap.Bytes>>20)
	report(row)
	if err := drop(); err != nil {
		return err
	}

	if err := r.sh(ctx, sb, "rm /data/big && dd if=/dev/urandom of=/data/mid bs=1M count=50 2>/dev/null"); err != nil {
		return err
	}
	if snap, err = sb.(sandbox.Snapshottable).Snapshot(ctx); err != nil {
		return err
	}
	defer func() { _ = r.b.DeleteSnapshot(context.WithoutCancel(ctx), snap.ID) }()
	restored := r.key("restored")
	row, err = r.time(ctx, "restore_same_engine_50mib", nil, func() error {
		_, err := r.b.Restore(ctx, restored, files, snap.ID)
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "a new instance from a 50 MiB snapshot, its image already loaded"
	report(row)

	var forks []sandbox.Key
	row, err = r.timeN(ctx, "fork_8_local", min(r.cfg.Reps, 10), func() error {
		for _, k := range forks {
			r.b.Dispose(ctx, k, sandbox.DisposeOptions{})
		}
		forks = nil
		for range 8 {
			forks = append(forks, r.key("fork"))
		}
		return nil
	}, func() error {
		_, err := r.b.Fork(ctx, snap.ID, forks, files)
		return err
	})
	if err != nil {
		return err
	}
	row.Note = "8 new sandboxes from one 50 MiB snapshot, each running, in all"
	report(row)
	return nil
}

// timeN is time with n timed repetitions instead of the configured count.
func (r *runner) timeN(ctx context.Context, name string, n int, setup func() error, op func() error) (Row, error) {
	saved := r.cfg.Reps
	r.cfg.Reps = max(n, 1)
	defer func() { r.cfg.Reps = saved }()
	return r.time(ctx, name, setup, op)
}

// sh runs a shell line in sb and fails unless it exits 0.
func (r *runner) sh(ctx context.Context, sb sandbox.Sandbox, line string) error {
	res, err := sb.Exec(ctx, sandbox.Shell(line), "/", 5*time.Minute)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("%q: exit %d: %s", line, res.ExitCode, res.Stderr())
	}
	return err
}

var _ sandbox.SnapshotKeeper = (*actors.Backend)(nil)
