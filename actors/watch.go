package actors

import (
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
)

// watchReset tells every container actor that the event stream broke: what they cached may
// have changed unseen.
type watchReset struct{}

// watcher keeps one engine event stream open for the backend's containers, so an actor can
// trust what it last inspected until an event says otherwise: a warm acquire of a
// runtime-only spec then needs no engine call at all.
type watcher struct {
	b       *Backend
	start   sync.Once
	stopped chan struct{}

	mu      sync.Mutex
	epoch   uint64 // changes whenever the stream starts or breaks
	healthy bool
	lag     WatchLag // since the last TakeWatchLag
}

// WatchLag says how far behind the daemon the event watch ran: for each event, the time from
// the daemon's stamp to the supervisor routing it to the container's actor.
type WatchLag struct {
	Events    int
	Max, Mean time.Duration
}

// TakeWatchLag returns the event watch's lag since the last call and starts a new count.
func (b *Backend) TakeWatchLag() WatchLag {
	if b.watch == nil {
		return WatchLag{}
	}
	w := b.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.lag
	if l.Events > 0 {
		l.Mean /= time.Duration(l.Events)
	}
	w.lag = WatchLag{}
	return l
}

// noteLag adds one event's lag (Mean holds the running sum until taken).
func (w *watcher) noteLag(at time.Time) {
	if w == nil || at.IsZero() {
		return
	}
	d := time.Since(at)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lag.Events++
	w.lag.Max = max(w.lag.Max, d)
	w.lag.Mean += d
}

func newWatcher(b *Backend) *watcher { return &watcher{b: b, stopped: make(chan struct{})} }

// watchedActions are the lifecycle events that change what an acquire decides. Exec events
// are left out: they say nothing about the container's state and are the busiest kind.
var watchedActions = []string{"create", "start", "restart", "die", "kill", "oom", "stop", "pause", "unpause", "destroy", "rename", "update"}

// epochFor starts the stream on first use and returns the epoch an inspect made now belongs
// to, or 0 (never fresh) while the stream is down.
func (w *watcher) epochFor(ctx context.Context) uint64 {
	w.start.Do(func() { go w.run() })
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.healthy {
		return 0
	}
	return w.epoch
}

// fresh reports whether an answer cached at epoch is still vouched for.
func (w *watcher) fresh(epoch uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.healthy && epoch != 0 && epoch == w.epoch
}

func (w *watcher) set(healthy bool) {
	w.mu.Lock()
	w.epoch++
	w.healthy = healthy
	w.mu.Unlock()
	if !healthy {
		w.b.system.Root.Send(w.b.supervisor, &watchReset{})
	}
}

// wait blocks until the stream goroutine has ended (after the backend's life ended).
func (w *watcher) wait() {
	started := true
	w.start.Do(func() { started = false })
	if started {
		<-w.stopped
	}
}

func (w *watcher) run() {
	defer close(w.stopped)
	life := w.b.life
	bo := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0)), life)
	filter := docker.EventFilter{Labels: map[string]string{label.Scope: ""}, Actions: watchedActions}
	for life.Err() == nil {
		events, err := w.b.engine.Events(life, filter)
		if err != nil {
			w.b.log.Debug("event watch", zap.Error(err))
			if d := bo.NextBackOff(); d != backoff.Stop {
				sleep(life, d)
			}
			continue
		}
		bo.Reset()
		w.set(true)
		for ev := range events {
			if ev.Err != nil {
				w.b.log.Debug("event watch ended", zap.Error(ev.Err))
				continue
			}
			w.b.system.Root.Send(w.b.supervisor, &containerChanged{Name: ev.Name, ID: ev.ID, Action: ev.Action, At: ev.Time})
		}
		w.set(false)
		sleep(life, bo.NextBackOff())
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
