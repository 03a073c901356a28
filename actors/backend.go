package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/telemetry"
)

// BackendName is the name the router's selection matches. It is fixed.
const BackendName = "docker"

// DefaultWorkDir is the storage base a spec without a WorkDir gets.
const DefaultWorkDir = "/maf-sandbox/work"

// Transfer ceilings in each direction: 64 MiB a file, 256 MiB in all, 256 files.
const (
	MaxBytesPerFile = 64 * sandbox.MiB
	MaxTotalBytes   = 256 * sandbox.MiB
	MaxFiles        = 256
)

// Backend is the Docker backend of the sandbox protocol: it implements [sandbox.Backend] by
// sending messages to one container actor per container. Build it with [NewBackend] (no
// engine call, no OS family declared) or [Create] (binds the daemon and declares its OS
// family), and Close it when done.
type Backend struct {
	cfg        docker.Config
	engine     retrying // the driver, under the read retries of retry.go
	log        *zap.Logger
	freezes    *Freezes
	osFamilies []sandbox.OSFamily
	askTimeout time.Duration

	idleTimeout time.Duration                    // a container actor idle this long is stopped; 0: never
	actorHook   func(name string, ev actorEvent) // tests: see tenure

	system     *actor.ActorSystem
	supervisor *actor.PID
	life       context.Context // ends at Close: stops the event watch and in-flight execs
	stop       context.CancelFunc
	watch      *watcher
	closeOnce  sync.Once

	reaping atomic.Bool                 // a Reap is in flight
	obs     atomic.Pointer[observerRef] // report.go: who hears the backend's acts; nil: nobody

	osFlight    flight[string] // cold acquires asking the daemon's OS at once share one call
	imageFlight flight[bool]   // likewise for an image's presence
	images      *imageFacts    // what fresh containers of each image ID showed (image_facts.go)

	mu       sync.Mutex
	acquired map[sandbox.SandboxID]map[string]struct{} // names this process handed out
	retained map[sandbox.Key]map[string]struct{}       // names whose removal failed

	egress egressOptions // allowlist settings (egress.go)

	filePlane    FilePlane     // the plane asked for (file_plane.go)
	execd        []byte        // the exec channel's supervisor binary, nil: none (exec_channel.go)
	channelRoots channelRoots  // the channel's commands running now (exec_channel.go)
	execPaths    execPaths     // how many commands took the channel and how many docker exec
	procLimits   ProcessLimits // the bounds of every sandbox's processes (process_opts.go)
	procs        dockerProcs   // the processes run through docker exec (process_docker.go)
	procStore    ProcessStore  // where processes' output is stored; nil: none (process_store.go)
	pumps        pumps         // the processes followed into procStore
	procObs      procWaiters   // the processes followed to their end for the observer (process_observe.go)
	host         hostState     // whether the host plane can be used at all
	topo         topologyState // what the daemon's allowlist topology is (egress_topology.go)

	netRemovals networkRemovals // networks disposals are removing after their reply (network_removal.go)

	pools    *warmPools // nil: no warm pool (pool.go)
	bindings bindings   // the pooled names' bindings known (pool_binding.go)

	metrics *telemetry.Metrics // nil: no metrics (instruments.go)
	tracer  trace.Tracer       // a no-op one without WithTracerProvider

	sleepDefault sandbox.Sleep  // the sleep of a spec that names none (sleep.go)
	sleeps       sleepBook      // the sandboxes asleep (sleep.go)
	markers      freezeMarkers  // freeze_marker.go
	snapStore    SnapshotStore  // snapshot.go; nil: no snapshots
	unfinished   time.Duration  // a layer with no record older than this is undone (snapshot.go)
	sweeps       sync.WaitGroup // the sweep of unfinished snapshots, joined by Close
	loadFlight   flight[bool]   // loads of one snapshot image at once share one
	daemon       struct {       // the daemon's ID, which names the markers
		mu sync.Mutex
		id string
	}
}

// newBackend is [NewBackend] without starting the warm pools.
func newBackend(cfg docker.Config, opts ...Option) (*Backend, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.engine == nil {
		e, err := docker.NewEngine(cfg, docker.WithLogger(o.logger), docker.WithMetrics(o.metrics), docker.WithTracerProvider(o.tracer))
		if err != nil {
			return nil, fmt.Errorf("new docker backend: %w", err)
		}
		o.engine = e
	}
	if o.freezes == nil {
		o.freezes = NewFreezes()
	}
	core := o.logger.Core()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(zapslog.NewHandler(core, zapslog.WithName("protoactor")))
	}), actor.WithDeadLetterRequestLogging(false)) // a request to a passivated actor is retried (ask)
	life, stop := context.WithCancel(context.Background())
	b := &Backend{
		cfg: cfg, engine: retrying{o.engine}, log: o.logger.With(zap.String("backend", BackendName)),
		freezes: o.freezes, askTimeout: o.askTimeout, idleTimeout: o.idleTimeout, actorHook: o.actorHook,
		system: system, life: life, stop: stop, egress: o.egress, images: newImageFacts(imageFactsLimit),
		filePlane: o.filePlane, execd: o.execd, metrics: o.metrics, tracer: telemetry.Tracer(o.tracer), procLimits: o.procLimits,
		procStore:    o.procStore,
		acquired:     map[sandbox.SandboxID]map[string]struct{}{},
		retained:     map[sandbox.Key]map[string]struct{}{},
		sleepDefault: o.sleep, snapStore: o.snapStore, unfinished: o.unfinished,
	}
	markerDir := DefaultFreezeMarkerDir()
	if o.markerDir != nil {
		markerDir = *o.markerDir
	}
	b.markers = newFreezeMarkers(markerDir, b.log)
	if o.observer != nil {
		b.obs.Store(&observerRef{o.observer})
	}
	if o.watch {
		b.watch = newWatcher(b)
	}
	b.pools = newWarmPools(b, o.pool)
	b.supervisor = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newSupervisor(b) },
		actor.WithSupervisor(restartStrategy())))
	b.log.Info("docker backend constructed (experimental, pre-1.0)")
	return b, nil
}

// NewBackend builds a backend without any engine call: the daemon is bound on first use and
// no OS family is declared, so specs that ask for one are refused. Its warm pool, if any,
// starts filling at once.
func NewBackend(cfg docker.Config, opts ...Option) (*Backend, error) {
	b, err := newBackend(cfg, opts...)
	if err != nil {
		return nil, err
	}
	b.startPools()
	return b, nil
}

// startPools starts the warm pools' filler. It runs acquires on the backend's actors, which
// read what Create learns (the OS family, the topology), so Create starts it only once that
// is written.
func (b *Backend) startPools() {
	if b.pools != nil {
		go b.pools.run(b.life)
	}
}

// Create builds a backend, binds the daemon at once (failing if it cannot), and declares the
// posix family when the daemon runs Linux, nothing otherwise.
func Create(ctx context.Context, cfg docker.Config, opts ...Option) (*Backend, error) {
	b, err := newBackend(cfg, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := b.engine.Bind(ctx); err != nil {
		b.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create docker backend: %w", err)
	}
	osName, err := b.engine.ServerOS(ctx)
	if err == nil && osName == "linux" {
		b.osFamilies = []sandbox.OSFamily{sandbox.OSPosix}
		b.log.Info("daemon runs linux; declaring posix guests")
		if cfg.EgressProxyImage != "" {
			if _, err := b.learnTopology(ctx, time.Now()); err != nil {
				b.log.Warn("allowlist not declared: the daemon's topology is unknown", zap.Error(err))
			}
		}
	} else {
		b.log.Warn("no guest OS family declared: specs naming RequiresOSFamily will be refused",
			zap.String("daemon_os", osName), zap.Error(err))
	}
	b.startPools()
	b.sweepSnapshots() // snapshot.go: what a dead engine left half made
	return b, nil
}

// Close stops the actors, the event watch and any exec still running on the host side. The
// containers stay; dispose them first if they should go.
func (b *Backend) Close(ctx context.Context) {
	b.closeOnce.Do(func() {
		b.stop()
		b.sweeps.Wait()
		if b.watch != nil {
			b.watch.wait()
		}
		if b.pools != nil {
			b.pools.drain() // the refill loop has ended: remove the members still waiting
		}
		// Passivations under way finish first, so that stopping the actors meets no actor
		// that is already stopping itself. Bounded like the stop that follows.
		if err := b.system.Root.RequestFuture(b.supervisor, &quiesce{}, 10*time.Second).Wait(); err != nil {
			b.log.Debug("quiesce supervisor", zap.Error(err))
		}
		if err := b.system.Root.PoisonFuture(b.supervisor).Wait(); err != nil {
			b.log.Debug("stop supervisor", zap.Error(err))
		}
		b.awaitNetworkRemovals() // the actors are stopped: no disposal starts another
		b.system.Shutdown()
	})
}

// Name is "docker".
func (b *Backend) Name() string { return BackendName }

// Isolation is container, a constant: no configuration raises it.
func (b *Backend) Isolation() sandbox.Isolation { return sandbox.IsolationContainer }

// Declarations describes what this backend serves; see the package documentation.
func (b *Backend) Declarations() sandbox.Declarations {
	ceiling := sandbox.TransferLimits{MaxBytesPerFile: MaxBytesPerFile, MaxTotalBytes: MaxTotalBytes, MaxFiles: MaxFiles}
	modes := sandbox.NewEgressSet(sandbox.EgressClosed)
	if b.servesAllowlist() {
		modes[sandbox.EgressAllowlist] = struct{}{}
	}
	// Processes run through the supervisor, or as docker execs whose start the driver reports
	// (so that none races a freeze: freeze.go). Reset makes the instance again from its image
	// (sandbox.go), which needs no snapshot store.
	caps := sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete,
		sandbox.HostTools, sandbox.Reclaim, sandbox.Processes, sandbox.Snapshot)
	b.snapshotCaps(caps) // snapshot.go
	scopes := []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall}
	if len(b.cfg.CapAdd) > 0 {
		// A guest given capabilities back can own, enter or rewrite what the removal rules
		// read as out of its reach: no deletion, no reclaim, and no sandbox outlives a call.
		delete(caps, sandbox.FilesDelete)
		delete(caps, sandbox.Reclaim)
		scopes = []sandbox.IsolationScope{sandbox.ScopeCall}
	}
	var methods []string
	if b.servesAllowlist() { // the proxy inspects (egress_inspect.go)
		caps[sandbox.EgressMethods] = struct{}{}
		methods = append([]string(nil), inspectedMethods...)
	}
	bounds := b.cfg.Bounds()
	return sandbox.Declarations{
		Capabilities:    caps,
		Limits:          &sandbox.SandboxLimits{FilesIn: ceiling, FilesOut: ceiling},
		Resources:       &sandbox.Resources{MemoryBytes: bounds.MemoryBytes, CPUs: bounds.CPUs, Pids: int64(bounds.Pids)},
		EgressModes:     modes,
		OSFamilies:      append([]sandbox.OSFamily(nil), b.osFamilies...),
		IsolationScopes: scopes,
		ObservesEgress:  b.servesAllowlist(),
		// Request-level egress: the proxy decides these methods and path patterns per request.
		EgressMethodTokens: methods,
		EgressPaths:        b.servesAllowlist(),
	}
}

// Acquire gets or creates the container of (key, spec.Kind) through its actor. It fails with
// a [*sandbox.BackendUnavailableError] when the daemon cannot be reached or did not answer in
// time (a probe, a start: busy, retry) and a
// [*sandbox.ImageMissingError] when the workload's or the egress proxy's image is not there.
func (b *Backend) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return b.acquire(ctx, key, spec, false)
}

// acquire is Acquire; fresh asks for a new instance (snapshot.go): one already under the
// key's name is refused, and no warm pool's member is taken.
func (b *Backend) acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec, fresh bool) (sandbox.Sandbox, error) {
	if !spec.Valid() {
		return nil, &sandbox.InvalidArgumentError{Reason: "the spec was not built by sandbox.NewSpec"}
	}
	if spec.Image == "" && spec.ImageID == "" {
		return nil, &sandbox.InvalidArgumentError{Reason: "the spec names neither image nor image_id"}
	}
	egressID := b.egressID(spec)
	name := docker.ContainerName(key, spec.Kind, egressID)
	b.pools.begin() // no refill starts before this acquire ends
	defer b.pools.end()
	pid, err := b.container(ctx, name)
	if err != nil {
		return nil, unavailable(err)
	}
	env := &request{msg: &acquireRequest{Key: key, Spec: spec.Clone(), EgressID: egressID, Fresh: fresh}}
	res, err := ask[*acquireResponse](ctx, b, name, pid, env, 0)
	if err != nil {
		return nil, unavailable(err)
	}
	if res.Err != nil {
		return nil, busy(res.Err)
	}
	sb := b.newHandle(pid, name, key, spec, res, env.bound)
	if !res.Created {
		b.reattach(sb) // process_store.go: an instance that may hold processes another engine followed
	}
	return sb, nil
}

// egressID is the egress identity an allowlisted spec's name carries; "" for any other.
func (b *Backend) egressID(spec sandbox.Spec) string {
	if spec.Egress != sandbox.EgressAllowlist {
		return ""
	}
	return docker.EgressID(b.cfg.EgressProxyImage, sandbox.EgressIdentities(spec.EgressAllow))
}

// remember records a name this process handed out, so disposal can reach it even when the
// engine's listing misses it.
func (b *Backend) remember(id sandbox.SandboxID, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acquired[id] == nil {
		b.acquired[id] = map[string]struct{}{}
	}
	b.acquired[id][name] = struct{}{}
}

// container returns the actor of name, spawning it under the supervisor when needed.
func (b *Backend) container(ctx context.Context, name string) (*actor.PID, error) {
	res, err := b.request(ctx, b.supervisor, &lookupContainer{name: name}, 0)
	if err == nil {
		if m, ok := res.(*containerPID); ok {
			return m.pid, nil
		}
		err = fmt.Errorf("unexpected reply %T", res)
	}
	return nil, answerError(err)
}

// request is the envelope every call sends to a container actor: the caller's context
// travels with the data of its message, and so, for a streaming exec, does the function that
// is handed the output (called from the exec's goroutine, never from the mailbox). bound is
// what a handle's acquire bound, for an actor spawned since (passivate.go); on an acquire the
// actor fills it in before it replies.
type request struct {
	ctx    context.Context
	msg    containerRequest
	output func(stream int, p []byte)
	bound  *binding
}

// ask sends env to pid, the actor of the
// container name, and waits for the reply, for the caller's ctx, or for the ask bound plus
// extra (the call's own timeout, for execs). A request that no actor ran — pid had stopped,
// passivated, before it was dispatched — comes back as a dead letter at once and is sent
// again, once, through the supervisor, which delivers it to the name's current actor.
func ask[T any](ctx context.Context, b *Backend, name string, pid *actor.PID, env *request, extra time.Duration) (T, error) {
	var zero T
	env.ctx = ctx
	res, err := b.request(ctx, pid, env, extra)
	if errors.Is(err, actor.ErrDeadLetter) {
		b.log.Debug("container actor had stopped; resending through the supervisor", zap.String("container", name))
		res, err = b.request(ctx, b.supervisor, &forward{name: name, env: env}, extra)
	}
	if err != nil {
		return zero, answerError(err)
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("unexpected reply %T", res)
	}
	return v, nil
}

// request sends one message to pid and waits for the answer, for ctx, or for the ask bound
// plus extra. An ErrDeadLetter says that no actor ran it.
func (b *Backend) request(ctx context.Context, pid *actor.PID, msg any, extra time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := b.system.Root.RequestFuture(pid, msg, b.askTimeout+extra)
	done := make(chan struct{})
	var res any
	var err error
	go func() { res, err = f.Result(); close(done) }()
	select {
	case <-done:
		return res, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answerError maps a request that found no actor, or no answer, to ErrEngineStopped.
func answerError(err error) error {
	if errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, actor.ErrTimeout) {
		return fmt.Errorf("%w: the engine did not answer (%v)", ErrEngineStopped, err)
	}
	return err
}

// isProxyName reports whether a listed name is a proxy's.
func isProxyName(name string) bool { return strings.HasSuffix(name, docker.ProxySuffix) }

// commandTimeout is the bound on one lifecycle or file-plane engine call.
func (b *Backend) commandTimeout() time.Duration {
	if b.cfg.CommandTimeout > 0 {
		return b.cfg.CommandTimeout
	}
	return docker.DefaultCommandTimeout
}

// isNotFound reports the engine saying the target is absent.
func isNotFound(err error) bool { return errors.Is(err, docker.ErrNotFound) }

// CheckHealth makes one round trip to the daemon (its OS, with no retry), bounded by the
// command timeout: nil when it answers, a [*sandbox.BackendUnavailableError] when it cannot
// be reached, else the engine's error.
func (b *Backend) CheckHealth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.commandTimeout())
	defer cancel()
	_, err := b.engine.Driver.ServerOS(ctx) // the raw driver: a health check never retries
	return unavailable(err)
}
