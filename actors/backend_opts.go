package actors

import (
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// Option configures a [Backend]. Nil options are skipped; the first error stops construction.
type Option func(*options) error

type options struct {
	logger      *zap.Logger
	engine      docker.Driver
	freezes     *Freezes
	askTimeout  time.Duration
	idleTimeout time.Duration
	watch       bool
	filePlane   FilePlane                        // file_plane.go
	execd       []byte                           // exec_channel.go; nil: docker exec only
	egress      egressOptions                    // egress.go
	metrics     *telemetry.Metrics               // instruments.go; nil: none
	tracer      trace.TracerProvider             // instruments.go; nil: no spans
	pool        poolOptions                      // pool.go
	observer    sandbox.Observer                 // report.go; nil: none until a router hands one
	procLimits  ProcessLimits                    // process_opts.go
	procStore   ProcessStore                     // process_store.go; nil: none
	actorHook   func(name string, ev actorEvent) // tests only
	sleep       sandbox.Sleep                    // sleep.go
	markerDir   *string                          // freeze_marker.go; nil: DefaultFreezeMarkerDir
	snapStore   SnapshotStore                    // snapshot.go; nil: no snapshots
	unfinished  time.Duration                    // snapshot.go
}

func defaultOptions() options {
	return options{logger: zap.NewNop(), askTimeout: 10 * time.Minute, unfinished: DefaultUnfinishedSnapshotAge, idleTimeout: DefaultIdleActorTimeout, watch: true, filePlane: FilePlaneAuto,
		procLimits: defaultProcessLimits()}
}

// WithObserver reports the backend's acts to obs from the start (default: none, until a
// router built over the backend hands it the router's, which replaces it): what a backend
// used without a router needs. See [Backend.ReportTo].
func WithObserver(obs sandbox.Observer) Option {
	return func(o *options) error { o.observer = obs; return nil }
}

// WithLogger sets the logger (default: none). protoactor's own logging is routed to it too.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}

// WithEngine replaces the engine seam (default: the driver the config's Driver selects). A
// [docker.Driver] is everything the backend asks of a daemon, so a value that compiles here
// serves closed and allowlisted sandboxes and the reaper alike.
func WithEngine(e docker.Driver) Option {
	return func(o *options) error { o.engine = e; return nil }
}

// WithFreezes shares a freeze record between backends of one process that reach the same
// daemon (default: the backend's own).
func WithFreezes(f *Freezes) Option {
	return func(o *options) error { o.freezes = f; return nil }
}

// WithAskTimeout bounds how long a call waits for its container actor beyond its own
// deadlines (default 10 minutes); it only guards against a lost reply.
func WithAskTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d > 0 {
			o.askTimeout = d
		}
		return nil
	}
}

// WithoutEventWatch turns off the engine event stream that keeps container state fresh
// between acquires; every acquire then inspects the container.
func WithoutEventWatch() Option {
	return func(o *options) error { o.watch = false; return nil }
}

// WithIdleActorTimeout stops a container actor that has been idle this long and holds nothing
// (no exec in flight, no freeze, no waiting call), and forgets what it knew of its container:
// the next call for the name gets a fresh actor, whose first acquire inspects again. An actor
// whose disposal removed everything is stopped at once. Default [DefaultIdleActorTimeout];
// zero or negative keeps every actor for the backend's life.
func WithIdleActorTimeout(d time.Duration) Option {
	return func(o *options) error { o.idleTimeout = max(d, 0); return nil }
}

// WithSleep sets the sleep times of every sandbox whose spec does not set its own
// (sandbox.WithSleep): paused after pauseAfter without a call, its processes kept; stopped
// after stopAfter, its filesystem kept; zero turns a step off (the default: no sleep). A
// negative time, or a stop not after the pause, is refused.
func WithSleep(pauseAfter, stopAfter time.Duration) Option {
	return func(o *options) error {
		s := sandbox.Sleep{PauseAfter: pauseAfter, StopAfter: stopAfter}
		if err := s.Validate(); err != nil {
			return err
		}
		o.sleep = s
		return nil
	}
}

// WithFreezeMarkers keeps the freeze markers (freeze_marker.go) in dir, which every engine
// process sharing a daemon on this host should share (default [DefaultFreezeMarkerDir]); ""
// keeps none, so a paused container found after a crash is taken for a sleep and woken.
func WithFreezeMarkers(dir string) Option {
	return func(o *options) error { o.markerDir = &dir; return nil }
}

// WithSnapshotStore keeps the sandboxes' snapshots in store ([NewSnapshotDir], or the
// events package's JetStream store), which makes the backend declare snapshot_files and
// fork (default: none, and neither is declared).
func WithSnapshotStore(store SnapshotStore) Option {
	return func(o *options) error { o.snapStore = store; return nil }
}

// WithUnfinishedSnapshotAge sets how old a snapshot's layer with no record must be before a
// backend starting up takes it for one its engine died writing, and removes it (default
// [DefaultUnfinishedSnapshotAge]: no live snapshot is written that long).
func WithUnfinishedSnapshotAge(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("unfinished snapshot age must be positive, got %s", d)}
		}
		o.unfinished = d
		return nil
	}
}

// withActorHook is told, from the actor's goroutine, what happens to the incarnations of
// container actors (tests).
func withActorHook(h func(name string, ev actorEvent)) Option {
	return func(o *options) error { o.actorHook = h; return nil }
}
