package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/sandbox"
)

// sleepFlags are serve's sleep settings (docs/operations.md, "Sleep"): off unless set; a
// spec's own sleep (its "sleep" field) wins over them.
type sleepFlags struct {
	s          sandbox.Sleep
	unfinished time.Duration // snapshots: how old a layer with no record is taken for a dead engine's
}

func (f *sleepFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.s.PauseAfter, "sleep-pause-after", envDuration("MAF_SANDBOX_SLEEP_PAUSE_AFTER", 0),
		"pause a sandbox nothing has called for this long (docker pause: its processes stay, frozen); the next call that needs it running wakes it; 0: never (env MAF_SANDBOX_SLEEP_PAUSE_AFTER)")
	fs.DurationVar(&f.s.StopAfter, "sleep-stop-after", envDuration("MAF_SANDBOX_SLEEP_STOP_AFTER", 0),
		"stop a sandbox nothing has called for this long (its files stay, its processes do not); its next acquire starts it again; 0: never (env MAF_SANDBOX_SLEEP_STOP_AFTER)")
	fs.DurationVar(&f.unfinished, "snapshot-unfinished-age", envDuration("MAF_SANDBOX_SNAPSHOT_UNFINISHED_AGE", actors.DefaultUnfinishedSnapshotAge),
		"at start, remove the snapshot layers without a record older than this: an engine died writing them (env MAF_SANDBOX_SNAPSHOT_UNFINISHED_AGE)")
}

// check refuses times that do not make a sleep.
func (f *sleepFlags) check() error {
	if err := f.s.Validate(); err != nil {
		return fmt.Errorf("--sleep-pause-after, --sleep-stop-after: %w", err)
	}
	if f.unfinished <= 0 {
		return fmt.Errorf("--snapshot-unfinished-age must be positive")
	}
	return nil
}

// options are the backend options of the times asked for.
func (f *sleepFlags) options() []actors.Option {
	return []actors.Option{actors.WithSleep(f.s.PauseAfter, f.s.StopAfter), actors.WithUnfinishedSnapshotAge(f.unfinished)}
}

// snapshotOptions are the backend's snapshot options on a NATS engine: the snapshots kept in
// JetStream's object store, where every engine of the cluster reads them. A store that cannot
// be made leaves the engine without snapshots, said once. (The sandboxes' lifecycle acts reach
// the events through the router, as every act does.)
func snapshotOptions(ctx context.Context, nc *nats.Conn, log *zap.Logger) []actors.Option {
	store, err := events.NewSnapshots(ctx, nc)
	if err != nil {
		log.Warn("no snapshots: their object store cannot be made", zap.Error(err))
		return nil
	}
	var _ actors.SnapshotStore = store
	return []actors.Option{actors.WithSnapshotStore(store)}
}
