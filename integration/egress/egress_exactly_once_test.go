package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// This file is the exactly-once proof of docs/events.md: engines that die after a proxy's
// drain and before its removal, or after its removal and the stream's acknowledgement of its
// window, and a NATS server restarted on its store mid-traffic — and still every window in
// the stream exactly once, each published only once its proxy's removal returned removed or
// absent. The deaths are test-only fault injection, entirely here: a driver wrapper that
// dies at the drained proxy's removal (and refuses every removal from then on, as a dead
// process removes nothing), a sink wrapper that dies once the stream acknowledged the
// window, and the dead engine's outbox closed without delivering (what a crash does to
// memory). Nothing in the engine's own code knows about them.

// eventsWindows is how many windows TestEgressAtScale/EventsExactlyOnceAcrossFaults runs.
func eventsWindows(t *testing.T) int {
	if fullScale(t) {
		return fullWindows
	}
	return scaleWindows
}

// eventsParallel is how many windows run at once: an allowlisted acquire mostly waits on the
// daemon, so a dozen keep it busy without queueing behind one another for long.
const eventsParallel = 12

// atOnce runs fn for 0..n-1, width at a time, and returns when all have.
func atOnce(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// errEngineDied is what a dead engine's daemon calls answer: a refusal, so nothing retries it.
var errEngineDied = &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("the engine died (test fault)")}

// The moments an engine dies at.
const (
	dieBeforeRemoval = iota + 1 // drained (stopped and read), recorded pending, not removed
	dieAfterRemoval             // removed, its pending record kept, nothing published
	dieAfterPublish             // removed, published and acknowledged, its pending record kept
)

// mortalDriver is a driver whose engine can die: with when dieBeforeRemoval it dies at the
// removal of the proxy it stopped and read, before asking the daemon; once dead it removes
// nothing, as a dead process would not.
type mortalDriver struct {
	docker.Driver
	when    int
	die     func()
	dead    atomic.Bool
	mu      sync.Mutex
	stopped string // the proxy a drain stopped
	victim  string // the proxy whose removal the engine died at
}

func (d *mortalDriver) ProxyStop(ctx context.Context, id string, grace time.Duration) error {
	d.mu.Lock()
	d.stopped = id
	d.mu.Unlock()
	return d.Driver.ProxyStop(ctx, id, grace)
}

func (d *mortalDriver) Remove(ctx context.Context, target string) (docker.RemoveOutcome, error) {
	if d.dead.Load() {
		return 0, errEngineDied
	}
	d.mu.Lock()
	drained := d.stopped != "" && d.stopped == target
	if drained && d.when == dieBeforeRemoval {
		d.victim = target
	}
	d.mu.Unlock()
	if drained && d.when == dieBeforeRemoval {
		d.die()
		return 0, errEngineDied
	}
	return d.Driver.Remove(ctx, target)
}

func (d *mortalDriver) NetworkRemove(ctx context.Context, id string) (docker.RemoveOutcome, error) {
	if d.dead.Load() {
		return 0, errEngineDied
	}
	return d.Driver.NetworkRemove(ctx, id)
}

func (d *mortalDriver) diedAt() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.victim
}

// dyingSink is a dying engine's sink. It records each window as pending before the removal,
// as engine serve's does; the backend hands it the window only after the proxy's removal
// returned (an engine dying before the removal hands it nothing). With when dieAfterRemoval
// it then dies without publishing; with dieAfterPublish it waits for the stream's
// acknowledgement and dies before forgetting the pending record.
type dyingSink struct {
	sandbox.NopObserver
	box              *events.Outbox
	pending          *events.PendingStore
	prefix, engineID string
	drv              *mortalDriver
	when             int
	mu               sync.Mutex
	ids              []string // windows handed over
	acked            []string // windows the stream acknowledged before the death
}

func (s *dyingSink) EgressPending(ctx context.Context, w sandbox.EgressWindow) {
	if !s.drv.dead.Load() {
		_ = s.pending.Put(ctx, w) // as WindowSink.EgressPending: a failure only reopens the gap
	}
}

func (s *dyingSink) EgressObserved(ctx context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	s.ids = append(s.ids, w.ProxyID)
	s.mu.Unlock()
	if s.drv.dead.Load() || s.when == dieBeforeRemoval {
		return
	}
	if s.when == dieAfterRemoval {
		s.drv.die()
		return
	}
	if err := s.box.EnqueueWindowWait(ctx, s.prefix, s.engineID, w); err == nil {
		s.mu.Lock()
		s.acked = append(s.acked, w.ProxyID)
		s.mu.Unlock()
	}
	s.drv.die()
}

// dyingEngine is an engine (a backend on cfg) that dies at when, publishing through pub
// under prefix with its own outbox. It never calls t.Fatal: workers make them.
func dyingEngine(ctx context.Context, t *testing.T, cfg docker.Config, pub events.Publisher, pending *events.PendingStore, prefix string, when int,
	log *zap.Logger) (*actors.Backend, *dyingSink, error) {
	inner, err := docker.NewEngine(cfg, docker.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	box, err := events.NewOutbox(pub, events.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	drv := &mortalDriver{Driver: inner, when: when}
	drv.die = func() {
		drv.dead.Store(true)
		dead, cancel := context.WithCancel(context.Background())
		cancel()
		box.Close(dead) // a crash: what the outbox held is gone
	}
	s := &dyingSink{box: box, pending: pending, prefix: prefix, engineID: eventsEngineID, drv: drv, when: when}
	b, err := actors.Create(ctx, cfg, actors.WithEngine(drv), actors.WithoutEventWatch(), actors.WithLogger(log), actors.WithObserver(s))
	if err != nil {
		box.Close(ctx)
		return nil, nil, err
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, s, nil
}

// eventsConfig is the backend configuration of the exactly-once tests (egressBackend's).
// daemonPendingStore is the pending store an engine on this machine's daemon keeps: scoped to
// the daemon's identity, as engine serve and engine reap scope theirs.
func daemonPendingStore(t *testing.T, nc *nats.Conn, prefix string) *events.PendingStore {
	t.Helper()
	drv, err := docker.NewEngine(docker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := drv.EngineID(itest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	pending, err := events.NewPendingStore(nc, prefix, events.WithPendingDaemon(id))
	if err != nil {
		t.Fatal(err)
	}
	return pending
}

func eventsConfig(fx *egressFixture) docker.Config {
	return docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second, EgressProxyImage: images.ProxyTag,
		OutboundNetwork: fx.network, EgressPrivateCIDRs: []netip.Prefix{netip.MustParsePrefix(egressSubnet)}}
}

// countingSink is a surviving engine's sink: it publishes as any engine does (after the
// removal) and remembers what.
type countingSink struct {
	events.WindowSink
	mu        sync.Mutex
	published map[string]int
}

func (s *countingSink) EgressObserved(ctx context.Context, w sandbox.EgressWindow) {
	s.WindowSink.EgressObserved(ctx, w)
	s.mu.Lock()
	s.published[w.ProxyID]++
	s.mu.Unlock()
}

func (s *countingSink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[id]
}

// Allowlisted windows (eventsWindows) across engine deaths and a NATS restart → each in the stream once.
// A quarter of the windows are disposed cleanly by one engine; a quarter by an engine that
// dies after the drain and before the proxy's removal (nothing published: the stopped proxy
// survives); a quarter by one that dies after the removal and the stream's acknowledgement
// of the window; a quarter cleanly by a second engine. Whoever comes next after a death —
// in turn another engine's dispose of the key, its purge of the conversation, or a reap of
// the scope — drains the surviving proxy and publishes its window once, or finds nothing
// left to drain.
// Halfway through, the NATS server is shut down and restarted on the same store. It runs
// under TestEgressAtScale.
func testEgressEventsExactlyOnceAcrossFaults(t *testing.T) {
	n := eventsWindows(t)
	fx := newEgressFixture(t)
	prefix := "maf.e2e." + randomHex(t)
	opts := natstest.Options(t.TempDir()) // the store outlives the first server
	opts.Port = freePort(t)
	srv := natstest.RunWithOptions(t, opts)
	url := srv.ClientURL()
	connect := func() *nats.Conn {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc := connect()
	pub, err := events.NewJetStreamPublisher(nc, events.WithSubjectPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStreams(itest.Context(t)); err != nil {
		t.Fatal(err)
	}
	newBox := func() *events.Outbox {
		box, err := events.NewOutbox(pub, events.WithBackoff(50*time.Millisecond, 500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { box.Close(context.Background()) })
		return box
	}
	cfg := eventsConfig(fx)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	pending := daemonPendingStore(t, nc, prefix)
	survivor := func() (*actors.Backend, *countingSink, *events.Outbox) {
		box := newBox()
		s := &countingSink{WindowSink: box.WindowSink(prefix, eventsEngineID).WithPending(pending), published: map[string]int{}}
		return egressBackend(t, fx.network, actors.WithObserver(s), actors.WithLogger(log)), s, box
	}
	look, err := docker.NewEngine(cfg) // the test's own eyes on the daemon
	if err != nil {
		t.Fatal(err)
	}
	engA, _, boxA := survivor()
	engB, sinkB, boxB := survivor()
	engR, sinkR, boxR := survivor() // the reaping engine: Reap runs one sweep at a time
	var reapMu sync.Mutex

	// A recovery pass, as engine serve runs one every 30 s: what it published, by proxy ID.
	var recMu sync.Mutex
	recovered := map[string]int{}
	recoverPass := func(ctx context.Context) error {
		_, err := pending.Recover(ctx, func(ctx context.Context, id string) (bool, error) {
			_, err := look.Inspect(ctx, id)
			if errors.Is(err, docker.ErrNotFound) {
				return true, nil
			}
			return false, err
		}, func(ctx context.Context, w sandbox.EgressWindow) error {
			err := boxR.EnqueueWindowWait(ctx, prefix, eventsEngineID, w)
			if err == nil {
				recMu.Lock()
				recovered[w.ProxyID]++
				recMu.Unlock()
			}
			return err
		})
		return err
	}

	// A dying engine is made in a worker goroutine: errors, never t.Fatal.
	var dying sync.Mutex
	var dead []*dyingSink
	newDying := func(ctx context.Context, when int) (*actors.Backend, *dyingSink, error) {
		b, s, err := dyingEngine(ctx, t, cfg, pub, pending, prefix, when, log)
		if err == nil {
			dying.Lock()
			dead = append(dead, s)
			dying.Unlock()
		}
		return b, s, err
	}

	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	egressID := docker.EgressID(images.ProxyTag, sandbox.EgressHosts(spec.EgressAllow))
	keys := make([]sandbox.Key, n)
	for i := range keys {
		keys[i] = itest.NewKey(t)
	}
	t.Cleanup(func() { // whatever a failure left behind
		eachAtOnce(n, func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = engA.Dispose(ctx, keys[i], sandbox.DisposeOptions{})
		})
		_ = engA.AwaitTeardowns(context.Background())
	})
	proxyIDs := make([]string, n)

	window := func(ctx context.Context, i int) error {
		key := keys[i]
		fault := [5]int{0, dieBeforeRemoval, dieAfterRemoval, dieAfterPublish, 0}[i%5]
		eng := engA
		switch {
		case i%5 == 4:
			eng = engB
		case fault != 0:
			d, _, err := newDying(ctx, fault)
			if err != nil {
				return fmt.Errorf("a dying engine: %w", err)
			}
			eng = d
		}
		sb, err := eng.Acquire(ctx, key, spec)
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
		if err != nil || strings.TrimSpace(res.Stdout()) != "code=200" {
			return fmt.Errorf("through the proxy: %v %s %s", err, res.Stdout(), res.Stderr())
		}
		info, err := look.Inspect(ctx, docker.ProxyName(docker.ContainerName(key, spec.Kind, egressID)))
		if err != nil {
			return fmt.Errorf("inspect the proxy: %w", err)
		}
		proxyIDs[i] = info.ID
		f := eng.Dispose(ctx, key, sandbox.DisposeOptions{})
		if fault == 0 {
			if f != nil {
				return fmt.Errorf("dispose: %v", f)
			}
			return nil
		}
		// The engine died in that dispose: before the proxy's removal (the stopped proxy is
		// the window's record, and the next drainer publishes it) or after it (nothing is
		// left to drain, only the network the dead engine did not remove; the pending record
		// is the window's, and a recovery pass publishes it).
		switch (i / 5) % 3 {
		case 0:
			f = engB.Dispose(ctx, key, sandbox.DisposeOptions{})
		case 1:
			if p := engB.DisposeScope(ctx, key.Scope, key.ThreadID); p.Undisposed != nil {
				return fmt.Errorf("purge after the death: %+v", p)
			}
		case 2:
			reapMu.Lock()
			r, err := engR.Reap(ctx, time.Nanosecond, reaper.WithScope(key.Scope))
			reapMu.Unlock()
			if want := map[int]int{dieBeforeRemoval: 1}[fault]; err != nil || len(r.Failures) > 0 || r.ProxiesRemoved != want {
				return fmt.Errorf("reap after the death: %+v %v", r, err)
			}
		}
		if f != nil {
			return fmt.Errorf("dispose after the death: %v", f)
		}
		if fault != dieBeforeRemoval {
			_ = recoverPass(ctx) // may fail while NATS restarts: the final pass follows
			// A dispose or purge of a key with no container left does not look for the
			// network the dead engine failed to remove (a reap does); the test removes it.
			if _, err := look.NetworkRemove(ctx, docker.NetworkName(docker.ContainerName(key, spec.Kind, egressID))); err != nil {
				return fmt.Errorf("the dead engine's network: %w", err)
			}
		}
		return nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	began := time.Now()
	var finished atomic.Int64
	half := make(chan struct{})
	errs := make([]error, n)
	all := make(chan struct{})
	go func() {
		defer close(all)
		atOnce(n, eventsParallel, func(i int) {
			errs[i] = window(ctx, i)
			if finished.Add(1) == int64(n/2) {
				close(half)
			}
		})
	}()
	select {
	case <-half:
	case <-all:
	}
	// NATS goes away mid-traffic and comes back on the same store; the windows drained
	// meanwhile, their proxies already removed, wait in their outboxes.
	atRestart := finished.Load()
	srv.Shutdown()
	srv.WaitForShutdown()
	time.Sleep(500 * time.Millisecond)
	again := natstest.Options(opts.StoreDir)
	again.Port = opts.Port
	srv = natstest.RunWithOptions(t, again)
	t.Logf("NATS restarted on its store after %d of %d windows", atRestart, n)
	<-all
	for i, err := range errs {
		if err != nil {
			t.Errorf("window %d of %d (%s): %v", i+1, n, keys[i], err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if err := errors.Join(engA.AwaitTeardowns(ctx), engB.AwaitTeardowns(ctx), engR.AwaitTeardowns(ctx)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); boxA.Stats().Pending+boxB.Stats().Pending+boxR.Stats().Pending > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("outboxes still hold windows: %+v %+v %+v", boxA.Stats(), boxB.Stats(), boxR.Stats())
		}
	}
	// The last recovery pass, then nothing may be pending: every record was forgotten by its
	// drainer or by a recovery that published it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err := recoverPass(ctx)
		left, lerr := pending.List(ctx)
		if err == nil && lerr == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending records left: %d (%v, %v)", len(left), err, lerr)
		}
	}
	took := time.Since(began)

	// Every dying engine died where it was meant to. One that died before the removal handed
	// nothing over, and a survivor published that window once; one that died after the
	// removal left nothing a survivor could drain, and a recovery pass published the window
	// (a second time, dropped by the stream, when the engine had published it).
	var diedBefore, diedAfterRemoval, diedAfter, republished int
	for _, s := range dead {
		s.mu.Lock()
		ids, acked := slices.Clone(s.ids), slices.Clone(s.acked)
		s.mu.Unlock()
		switch s.when {
		case dieBeforeRemoval:
			victim := s.drv.diedAt()
			if len(ids) != 0 || victim == "" {
				t.Errorf("an engine dying before the removal was handed %d windows and died at %q", len(ids), victim)
				continue
			}
			diedBefore++
			if c := sinkB.count(victim) + sinkR.count(victim); c != 1 {
				t.Errorf("the window of %s, whose engine died before removing it, was published %d times by the survivors, want 1", victim, c)
			}
			republished += sinkB.count(victim) + sinkR.count(victim)
		case dieAfterRemoval, dieAfterPublish:
			if wantAcked := map[int]int{dieAfterPublish: 1}[s.when]; len(ids) != 1 || len(acked) != wantAcked {
				t.Errorf("an engine dying at %d was handed %d windows and had %d acknowledged, want 1 and %d", s.when, len(ids), len(acked), wantAcked)
				continue
			}
			if s.when == dieAfterRemoval {
				diedAfterRemoval++
			} else {
				diedAfter++
			}
			if c := sinkB.count(ids[0]) + sinkR.count(ids[0]); c != 0 {
				t.Errorf("the window of %s, whose proxy its dead engine removed, was drained again %d times", ids[0], c)
			}
			recMu.Lock()
			c := recovered[ids[0]]
			recMu.Unlock()
			if c == 0 {
				t.Errorf("the pending window of %s (engine died at %d) was not published by a recovery", ids[0], s.when)
			}
		}
	}
	if diedAfter == 0 || diedAfterRemoval == 0 || diedBefore == 0 || republished != diedBefore {
		t.Fatalf("faults not exercised: %d deaths before the removal (%d windows published by a survivor), %d after the removal, %d after the publication",
			diedBefore, republished, diedAfterRemoval, diedAfter)
	}

	// Read the stream back as a consumer would: each window exactly once, none missing.
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamEgress, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for total := 0; ; {
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var ev events.EgressObservedEvent
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatalf("decode %s: %v", m.Data(), err)
			}
			if ev.EventID != m.Headers().Get(events.HeaderMsgID) || ev.EventID != events.EgressEventID(ev.Proxy.ContainerID) ||
				ev.Counts != (events.EventCounts{Allow: 1}) || len(ev.Decisions) != 1 || ev.Decisions[0].Host != allowedHost {
				t.Errorf("event %s", m.Data())
			}
			seen[ev.Proxy.ContainerID]++
		}
		if total += got; got == 0 {
			break
		}
	}
	missing, twice := 0, 0
	for i, id := range proxyIDs {
		switch c := seen[id]; {
		case c == 0:
			missing++
			t.Errorf("window %d (proxy %s) is not in the stream", i+1, id)
		case c > 1:
			twice++
			t.Errorf("window %d (proxy %s) is in the stream %d times", i+1, id, c)
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("the stream holds windows of no proxy of this test: %v", seen)
	}
	ctrs := strings.Fields(dockertest.Docker(t, "ps", "-aq", "--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process(), "--filter", "name=maf-sandbox-docker-"))
	nets := strings.Fields(dockertest.Docker(t, "network", "ls", "--quiet", "--filter", "label="+dockertest.LabelProcess+"="+dockertest.Process(), "--filter", "name=maf-sandbox-docker-"))
	if len(ctrs) != 0 || len(nets) != 0 {
		t.Errorf("after the test: %d containers and %d networks of the sandboxes are left", len(ctrs), len(nets))
	}
	t.Logf("%d windows in %s: %d engines died before the removal (their windows published by a survivor), %d after the removal and %d after the publication (theirs published by a recovery); %d missing, %d twice",
		n, took.Round(time.Second), diedBefore, diedAfterRemoval, diedAfter, missing, twice)
}

// engine reap --nats-url, as an operator runs it after an engine crashed mid-dispose: the
// proxy an engine left when it died after the drain and before the removal is drained again
// by the sweep, removed, and only then published; the window of an engine that died after
// the removal and before publishing is published by the sweep's recovery pass from its
// pending record (the proxy confirmed absent); that of one that died after its publication
// is published again by that pass and dropped by the stream. Each window is in the stream
// exactly once.
func TestReapCommandPublishesWhatADeadEngineLeft(t *testing.T) {
	fx := newEgressFixture(t)
	srv := natstest.Run(t)
	nc := natstest.Connect(t, srv)
	prefix := "maf.e2e." + randomHex(t)
	pub, err := events.NewJetStreamPublisher(nc, events.WithSubjectPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx := itest.Context(t)
	if err := pub.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "engine")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/mafsandbox/engine/cmd/engine").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	cleanup := egressBackend(t, fx.network, actors.WithLogger(log)) // removes whatever a failure leaves
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	egressID := docker.EgressID(images.ProxyTag, sandbox.EgressHosts(spec.EgressAllow))
	pending := daemonPendingStore(t, nc, prefix)
	want := map[string]egresslog.Trigger{} // proxy ID → the drain whose window is in the stream
	for _, when := range []int{dieBeforeRemoval, dieAfterRemoval, dieAfterPublish} {
		key := itest.NewKey(t)
		t.Cleanup(func() { _ = cleanup.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
		b, s, err := dyingEngine(ctx, t, eventsConfig(fx), pub, pending, prefix, when, log)
		if err != nil {
			t.Fatal(err)
		}
		useAllowlist(t, b, key, fx)
		proxy := docker.ProxyName(docker.ContainerName(key, spec.Kind, egressID))
		proxyID := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Id}}", proxy))
		_ = b.Dispose(ctx, key, sandbox.DisposeOptions{}) // it dies in there
		s.mu.Lock()
		handed, acked := len(s.ids), len(s.acked)
		s.mu.Unlock()
		if wantHanded, wantAcked := map[int]int{dieAfterRemoval: 1, dieAfterPublish: 1}[when], map[int]int{dieAfterPublish: 1}[when]; handed != wantHanded || acked != wantAcked || !s.drv.dead.Load() {
			t.Fatalf("the engine dying at %d was handed %d windows and had %d acknowledged (dead: %v)", when, handed, acked, s.drv.dead.Load())
		}
		first := egresslog.TriggerReap
		if when != dieBeforeRemoval {
			first = egresslog.TriggerDispose
		}
		want[proxyID] = first
		time.Sleep(1100 * time.Millisecond) // older than the sweep's cutoff
		out, err := exec.Command(bin, "reap", "--older-than", "1s", "--scope", key.Scope, "--json",
			"--nats-url", srv.ClientURL(), "--nats-prefix", prefix).CombinedOutput()
		if err != nil {
			t.Fatalf("engine reap: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(dockertest.Docker(t, "ps", "-aq", "--filter", "name="+proxy)); got != "" {
			t.Fatalf("the dead engine's proxy %s is still there after the sweep", proxy)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(ctx, events.StreamEgress, jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for m := range batch.Messages() {
		var ev events.EgressObservedEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		seen[ev.Proxy.ContainerID]++
		if string(want[ev.Proxy.ContainerID]) != ev.Trigger || ev.Counts.Allow != 1 || ev.Counts.Deny != 1 {
			t.Errorf("event %s", m.Data())
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("stream holds windows %v, want one each of %v", seen, want)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("window of %s in the stream %d times", id, c)
		}
	}
	if left, err := pending.List(ctx); err != nil || len(left) != 0 {
		t.Errorf("pending records left after the sweeps: %d (%v)", len(left), err)
	}
}
