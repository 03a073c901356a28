package main

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/cmd/engine/internal/embedded"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/cmd/engine/internal/version"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/fingerprint"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
	"github.com/mafsandbox/engine/telemetry"
)

// defaultListen is where the embedded NATS server listens: loopback, the NATS port, so the
// nats CLI, nats-py and "engine run" find it with no configuration.
const defaultListen = "127.0.0.1:4222"

// defaultNATSURL is the URL clients use when none is given: the embedded server's.
const defaultNATSURL = "nats://" + defaultListen

const serveUsage = `Usage: engine serve [flags]

Answers the sandbox API on NATS (docs/nats-api.md) with the local Docker daemon behind it.

With no --nats-url it starts an embedded NATS server with JetStream, bound to loopback only
(--listen, default 127.0.0.1:4222) and storing under --data-dir. With --nats-url it connects
to that server with the credentials given (user/password, token, nkey seed, creds file, TLS).

Every flag can also be set in the environment variable named in its help. On SIGINT or
SIGTERM the engine drains: it stops taking requests, lets the ones in flight finish (at most
--drain-timeout) and exits. Sandboxes stay; dispose them, or reap them later. On SIGUSR1 it
goes lame duck: it takes no new sandboxes (the pool's other engines do) and keeps serving the
ones it holds until SIGTERM (docs/operations.md).

Flags:
`

// serveVerb is "engine serve": the engine as a NATS service until ctx ends.
type serveVerb struct {
	conn                                                        natsFlags
	logs                                                        logFlags
	listen, dataDir, readyFile, engineID, dockerPath            string
	proxyImage, outbound, subnetPool, privateCIDRs, eventPrefix string
	upstreamCAs                                                 string // a PEM file inspecting proxies verify hosts against
	observerImage, metricsListen, otlpEndpoint                  string
	drain, idleActors, eventDupes                               time.Duration
	labels                                                      settings.Labels
	place                                                       placementFlags
	tenancy                                                     tenancyFlags
	execChannel, execChannelAsked                               bool          // asked: set by flag or env, so a missing supervisor fails the start
	pool                                                        poolFlags     // serve_pool.go
	limits                                                      limitFlags    // serve_limits.go
	resources                                                   resourceFlags // serve_resources.go
	procRetentionBytes                                          int64         // each process's output kept on JetStream
	procRetentionAge                                            time.Duration
	sleep                                                       sleepFlags // serve_sleep.go
}

// serveCmd parses args into a [serveVerb] and runs it.
func serveCmd(ctx context.Context, args []string) error {
	v := &serveVerb{labels: settings.Labels{}}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *serveVerb) parse(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	v.conn.register(fs)
	fs.StringVar(&v.listen, "listen", envOr("MAF_SANDBOX_LISTEN", defaultListen), "embedded NATS server address, loopback only; port 0 picks a free one (env MAF_SANDBOX_LISTEN)")
	fs.StringVar(&v.dataDir, "data-dir", envOr("MAF_SANDBOX_DATA_DIR", defaultDataDir()), "embedded NATS server's JetStream store (env MAF_SANDBOX_DATA_DIR)")
	fs.StringVar(&v.readyFile, "ready-file", envOr("MAF_SANDBOX_READY_FILE", ""), "write the NATS URL clients should use to this file once serving (env MAF_SANDBOX_READY_FILE)")
	fs.StringVar(&v.engineID, "engine-id", envOr("MAF_SANDBOX_ENGINE_ID", ""), "this engine's ID on its own subjects; default random at each start (env MAF_SANDBOX_ENGINE_ID)")
	fs.StringVar(&v.dockerPath, "docker", envOr("MAF_SANDBOX_DOCKER", docker.DefaultDockerPath), "the Docker CLI binary (env MAF_SANDBOX_DOCKER)")
	fs.StringVar(&v.observerImage, "observer-image", envOr("MAF_SANDBOX_DOCKER_OBSERVER_IMAGE", images.ObserverTag),
		"fingerprint observer image, resolved to its ID per baseline (env MAF_SANDBOX_DOCKER_OBSERVER_IMAGE; engine images build makes the default)")
	fs.StringVar(&v.proxyImage, "egress-proxy-image", envOr("MAF_SANDBOX_EGRESS_PROXY_IMAGE", ""), "egress proxy image; serves allowlist egress when set (env MAF_SANDBOX_EGRESS_PROXY_IMAGE)")
	fs.StringVar(&v.outbound, "egress-outbound-network", envOr("MAF_SANDBOX_EGRESS_OUTBOUND_NETWORK", docker.DefaultOutboundNetwork), "existing network every egress proxy's outbound leg joins (env MAF_SANDBOX_EGRESS_OUTBOUND_NETWORK)")
	fs.StringVar(&v.subnetPool, "egress-subnet-pool", envOr("MAF_SANDBOX_EGRESS_SUBNET_POOL", docker.DefaultEgressSubnetPool), "IPv4 range every allowlisted sandbox's internal network takes a /29 from (env MAF_SANDBOX_EGRESS_SUBNET_POOL)")
	fs.StringVar(&v.privateCIDRs, "egress-private-cidrs", envOr("MAF_SANDBOX_EGRESS_PRIVATE_CIDRS", ""), "comma-separated private CIDR blocks an allowlisted name may resolve into and still be dialled (internal hosts); empty admits none; never loopback, link-local or metadata addresses (docs/operations.md) (env MAF_SANDBOX_EGRESS_PRIVATE_CIDRS)")
	fs.StringVar(&v.upstreamCAs, "egress-upstream-cas", envOr("MAF_SANDBOX_EGRESS_UPSTREAM_CAS", ""), "PEM bundle file inspecting egress proxies verify inspected hosts against; the proxy image holds no system roots, so give your host's (/etc/ssl/certs/ca-certificates.crt) to reach public hosts; empty: none, and inspected requests to public hosts fail closed (env MAF_SANDBOX_EGRESS_UPSTREAM_CAS)")
	fs.StringVar(&v.eventPrefix, "event-prefix", envOr("MAF_SANDBOX_EVENT_PREFIX", events.DefaultSubjectPrefix), "subject prefix of the events published to JetStream: reap summaries, and egress windows when --egress-proxy-image is set; host-tool call events (core NATS) go under it too; empty publishes none (env MAF_SANDBOX_EVENT_PREFIX)")
	v.place.register(fs)
	v.tenancy.register(fs)
	fs.Int64Var(&v.procRetentionBytes, "process-retention-bytes", envInt64("MAF_SANDBOX_PROCESS_RETENTION_BYTES", events.DefaultProcessRetentionBytes), "how many of each process's last output bytes the process stream keeps; a process may ask for fewer (docs/events.md, process output) (env MAF_SANDBOX_PROCESS_RETENTION_BYTES)")
	fs.DurationVar(&v.procRetentionAge, "process-retention-age", envDuration("MAF_SANDBOX_PROCESS_RETENTION_AGE", events.DefaultProcessRetentionAge), "how long the process stream keeps a process's output; a process may ask for less (env MAF_SANDBOX_PROCESS_RETENTION_AGE)")
	fs.DurationVar(&v.eventDupes, "event-duplicate-window", envDuration("MAF_SANDBOX_EVENT_DUPLICATE_WINDOW", events.DefaultDuplicateWindow), "the event streams' duplicate window: longer than a proxy may outlive its engine's crash before another drain (docs/events.md) (env MAF_SANDBOX_EVENT_DUPLICATE_WINDOW)")
	fs.DurationVar(&v.drain, "drain-timeout", envDuration("MAF_SANDBOX_DRAIN_TIMEOUT", 30*time.Second), "how long shutdown waits for calls in flight (env MAF_SANDBOX_DRAIN_TIMEOUT)")
	fs.BoolVar(&v.execChannel, "exec-channel", envBoolOr("MAF_SANDBOX_EXEC_CHANNEL", true), "give closed sandboxes the exec channel's supervisor, so commands skip docker exec; on unless turned off, and when its binary cannot be had the engine says so and takes docker exec (docs/architecture.md, \"The exec channel\"; env MAF_SANDBOX_EXEC_CHANNEL=0 turns it off)")
	fs.DurationVar(&v.idleActors, "idle-actor-timeout", envDuration("MAF_SANDBOX_IDLE_ACTOR_TIMEOUT", actors.DefaultIdleActorTimeout), "how long the engine keeps what it knows of a container nothing has called; 0 keeps it for the engine's life (env MAF_SANDBOX_IDLE_ACTOR_TIMEOUT)")
	fs.StringVar(&v.metricsListen, "metrics-listen", envOr("MAF_SANDBOX_METRICS_LISTEN", ""), "serve Prometheus metrics on GET /metrics at this address; a bare :port listens on loopback; empty serves none (env MAF_SANDBOX_METRICS_LISTEN)")
	fs.StringVar(&v.otlpEndpoint, "otlp-endpoint", envOr("MAF_SANDBOX_OTLP_ENDPOINT", ""), "export traces over OTLP/HTTP to this base URL (http://collector:4318): a span per API call, continuing the request's traceparent, with a child per Docker daemon call; empty exports none (env MAF_SANDBOX_OTLP_ENDPOINT)")
	fs.Var(v.labels, "label", "extra label k=v on every container the engine creates; repeatable")
	v.pool.register(fs)
	v.limits.register(fs)
	v.resources.register(fs)
	v.sleep.register(fs)
	v.logs.register(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), serveUsage); fs.PrintDefaults() }
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	v.execChannelAsked = os.Getenv("MAF_SANDBOX_EXEC_CHANNEL") != "" // an empty variable asks for nothing
	fs.Visit(func(f *flag.Flag) { v.execChannelAsked = v.execChannelAsked || f.Name == "exec-channel" })
	if err := v.pool.check(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := v.limits.check(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := v.sleep.check(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	return nil
}

// run serves until ctx ends, then drains.
func (v *serveVerb) run(ctx context.Context) error {
	log, err := v.logs.logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	url, dial, stopEmbedded, err := v.nats(log)
	if err != nil {
		return err
	}
	defer stopEmbedded()
	nc, err := dial("maf-sandbox engine serve")
	if err != nil {
		return err
	}
	defer nc.Close()
	// The events go out on a connection of their own: JetStream publishing subscribes for its
	// acknowledgements, and the service's drain waits for the API connection's subscriptions
	// to be its own again.
	eventsNC, err := dial("maf-sandbox engine serve events")
	if err != nil {
		return err
	}
	defer eventsNC.Close()
	cfg, err := v.config()
	if err != nil {
		return err
	}
	metrics, tp, closeTelemetry, err := v.telemetry(ctx, log)
	if err != nil {
		return err
	}
	defer closeTelemetry()
	// One driver serves the backend, which answers the daemon's ID the events carry.
	drv, err := docker.NewEngine(cfg, docker.WithLogger(log.Named("actors")), docker.WithMetrics(metrics), docker.WithTracerProvider(tp))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	daemonUp := checkDaemon(ctx, drv, v.dockerPath, log) // serve_daemon.go
	procStore, err := v.processStore(eventsNC, log)
	if err != nil {
		return err
	}
	backendOpts := append(append(procStore, snapshotOptions(ctx, eventsNC, log)...), actors.WithMetrics(metrics), actors.WithTracerProvider(tp)) // serve_sleep.go
	backend, closeBackend, err := v.backend(ctx, cfg, drv, log, backendOpts...)
	if err != nil {
		return err
	}
	ev, err := v.events(ctx, eventsNC, backend, metrics, log)
	if err != nil {
		closeBackend()
		return err
	}
	// The events close after the backend, which still reports the windows of the proxies
	// it drains.
	defer func() {
		closeBackend()
		v.closeEvents(ctx, ev, log)
	}()
	router, err := newRouter(backend, ev, metrics, log)
	if err != nil {
		return err
	}
	opts := []service.Option{service.WithLogger(log.Named("service")), service.WithPrefix(v.conn.prefix),
		service.WithReaper(backendReaper(backend)), service.WithVersion(version.Build()),
		service.WithMetrics(metrics), service.WithTracerProvider(tp)}
	opts = append(opts, v.limits.serviceOptions()...)
	if ev != nil {
		opts = append(opts, service.WithEventStats(ev))
	}
	tenancyOpt, mode, err := v.tenancy.option(v.conn.url == "")
	if err != nil {
		return err
	}
	log.Info("engine mode", zap.String("mode", mode))
	opts = append(opts, tenancyOpt)
	placeOpts, closePlacement, err := v.placement(ctx, dial, drv, log)
	if err != nil {
		return err
	}
	defer closePlacement()
	opts = append(opts, placeOpts...)
	fpOpt, err := fingerprinter(cfg, v.observerImage, log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	opts = append(opts, fpOpt)
	svc, err := service.New(nc, router, opts...)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("engine ready", zap.String("version", version.Build()), zap.String("nats_url", url), zap.String("engine", svc.EngineID()),
		zap.String("prefix", svc.Prefix()), zap.String("isolation", string(backend.Isolation())), zap.String("mode", mode),
		zap.Bool("daemon_reachable", daemonUp))
	if v.readyFile != "" {
		if err := os.WriteFile(v.readyFile, []byte(url+"\n"), 0o600); err != nil {
			_ = svc.Stop(context.WithoutCancel(ctx))
			return fmt.Errorf("serve: write the ready file: %w", err)
		}
	}

	lameDuck(ctx, svc, log)
	v.shutdown(ctx, svc, nc, log)
	return nil
}

// newRouter is the router over backend. Every act is reported where it happens (the router,
// the backend it hands the observer to, the service through the router's): the events
// publish it (ev, nil when off), the metrics count it.
func newRouter(backend *actors.Backend, ev *events.Events, metrics *telemetry.Metrics, log *zap.Logger) (*sandbox.Router, error) {
	var observers []sandbox.Observer
	if ev != nil {
		observers = append(observers, ev)
	}
	if metrics != nil {
		observers = append(observers, metrics)
	}
	router, err := sandbox.NewRouter([]sandbox.Backend{backend}, sandbox.WithMinIsolation(sandbox.IsolationContainer),
		sandbox.WithLogger(log.Named("router")), sandbox.WithObserver(sandbox.Observers(observers...)))
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return router, nil
}

// nats returns the URL clients use and how to open a connection to it: the embedded server
// (started here; stop shuts it down) without --nats-url, else the server it names.
func (v *serveVerb) nats(log *zap.Logger) (url string, dial func(name string) (*nats.Conn, error), stop func(), err error) {
	if v.conn.url != "" {
		return v.conn.url, func(name string) (*nats.Conn, error) { return v.conn.connect(name, log) }, func() {}, nil
	}
	srv, err := embedded.Start(v.listen, v.dataDir, log)
	if err != nil {
		return "", nil, nil, err
	}
	url = srv.ClientURL()
	dial = func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect(url, nats.InProcessServer(srv), nats.Name(name))
		if err != nil {
			return nil, fmt.Errorf("serve: connect to the embedded server: %w", err)
		}
		return nc, nil
	}
	return url, dial, func() { srv.Shutdown(); srv.WaitForShutdown() }, nil
}

// config is the Docker configuration the flags give, the subnet pool and the private
// allowance checked.
func (v *serveVerb) config() (docker.Config, error) {
	pool, err := netip.ParsePrefix(v.subnetPool)
	if err != nil {
		return docker.Config{}, fmt.Errorf("serve: --egress-subnet-pool %q: %w", v.subnetPool, err)
	}
	if _, err := docker.NewSubnetPool(pool, docker.EgressSubnetBits); err != nil {
		return docker.Config{}, fmt.Errorf("serve: --egress-subnet-pool: %w", err)
	}
	private, err := docker.ParsePrivateCIDRs(v.privateCIDRs)
	if err != nil {
		return docker.Config{}, fmt.Errorf("serve: --egress-private-cidrs: %w", err)
	}
	cfg := docker.Config{DockerPath: v.dockerPath, EgressProxyImage: v.proxyImage, Labels: v.labels, EgressSubnetPool: pool,
		OutboundNetwork: v.outbound, EgressPrivateCIDRs: private}
	if err := v.resources.apply(&cfg); err != nil {
		return docker.Config{}, fmt.Errorf("serve: %w", err)
	}
	if err := docker.CheckConfig(cfg); err != nil {
		return docker.Config{}, fmt.Errorf("serve: %w", err)
	}
	return cfg, nil
}

// backend creates the Docker backend on drv with extra options (its telemetry); the router
// hands it its observer. closeAll closes it.
func (v *serveVerb) backend(ctx context.Context, cfg docker.Config, drv docker.Driver, log *zap.Logger,
	extra ...actors.Option) (b *actors.Backend, closeAll func(), err error) {
	planeOpt, err := settings.FilePlane()
	if err != nil {
		return nil, nil, err
	}
	backendOpts := append([]actors.Option{actors.WithEngine(drv), actors.WithLogger(log.Named("actors")), actors.WithIdleActorTimeout(v.idleActors), planeOpt}, extra...)
	backendOpts = append(backendOpts, v.pool.options()...)
	backendOpts = append(backendOpts, v.sleep.options()...)
	upstream, err := v.upstreamOption()
	if err != nil {
		return nil, nil, err
	}
	backendOpts = append(backendOpts, upstream)
	if v.execChannel {
		execd, err := images.ExecSupervisor(ctx, v.dockerPath)
		switch {
		case err == nil:
			backendOpts = append(backendOpts, actors.WithExecChannel(execd))
		case v.execChannelAsked:
			return nil, nil, fmt.Errorf("serve: --exec-channel: %w", err)
		default: // the default, not a request: serve with docker exec and say why
			log.Warn("exec channel off: no supervisor binary for the daemon's platform (this engine embeds none and could not build one: "+
				"build it with make engine, or install the Go toolchain where it runs); commands take docker exec", zap.Error(err))
		}
	}
	b, err = actors.Create(ctx, cfg, backendOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	return b, func() { b.Close(context.WithoutCancel(ctx)) }, nil
}

// upstreamOption is the backend option of --egress-upstream-cas: the PEM bundle read from
// its file, refused when unreadable or without a PEM block; nil when the flag is empty.
func (v *serveVerb) upstreamOption() (actors.Option, error) {
	if v.upstreamCAs == "" {
		return nil, nil
	}
	pemBundle, err := os.ReadFile(v.upstreamCAs)
	if err == nil {
		if b, _ := pem.Decode(pemBundle); b == nil {
			err = errors.New("no PEM block")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("serve: --egress-upstream-cas %s: %w", v.upstreamCAs, err)
	}
	return actors.WithEgressUpstreamCAs(pemBundle), nil
}

// events starts the engine's events on nc under --event-prefix (nil when it is empty): reap
// summaries, host-tool calls, and with --egress-proxy-image the egress windows, recorded as
// pending before each proxy's removal and recovered every events.DefaultRecoveryEvery.
func (v *serveVerb) events(ctx context.Context, nc *nats.Conn, daemon *actors.Backend, metrics *telemetry.Metrics, log *zap.Logger) (*events.Events, error) {
	if v.eventPrefix == "" {
		return nil, nil
	}
	opts := []events.Option{events.WithPrefix(v.eventPrefix), events.WithLogger(log),
		events.WithStreams(events.WithDuplicateWindow(v.eventDupes))}
	if v.proxyImage != "" {
		// Egress windows need the daemon's identity: events.New asks it and refuses without it.
		opts = append(opts, events.WithDaemon(daemon))
	} else {
		// No proxies, no windows to recover; the daemon's ID is only what the reap summaries
		// carry, and an engine serves (answering health as unavailable) with its daemon down.
		opts = append(opts, events.WithRecoveryEvery(0))
		if _, err := daemon.EngineID(ctx); err == nil {
			opts = append(opts, events.WithDaemon(daemon))
		} else {
			log.Warn("the daemon's ID is unknown: reap summaries carry none", zap.Error(err))
		}
	}
	ev, err := events.New(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	// Reported until the meter provider shuts down, after the events close: no unregister.
	if _, err := metrics.ObserveEvents(func() telemetry.EventCounts {
		st := ev.Stats()
		return telemetry.EventCounts{Pending: st.Pending, Blocked: st.Blocked, Delivered: st.Delivered, Dropped: st.Refused,
			Failed: st.Failed, StreamRefusals: st.StreamRefusals}
	}); err != nil {
		_ = ev.Close(ctx)
		return nil, fmt.Errorf("serve: %w", err)
	}
	return ev, nil
}

// processStore keeps processes' output on JetStream (docs/events.md), where it outlives the
// engine, when events are on: the option that gives the backend the store, none otherwise.
func (v *serveVerb) processStore(nc *nats.Conn, log *zap.Logger) ([]actors.Option, error) {
	if v.eventPrefix == "" {
		return nil, nil
	}
	store, err := events.NewProcessStreams(nc, events.WithProcessPrefix(v.eventPrefix), events.WithProcessLogger(log.Named("processes")),
		events.WithProcessRetention(v.procRetentionBytes, v.procRetentionAge), events.WithProcessDuplicateWindow(v.eventDupes))
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return []actors.Option{actors.WithProcessStore(store)}, nil
}

// shutdown stops taking requests, lets the ones in flight finish (at most the drain timeout)
// and drains the API connection.
func (v *serveVerb) shutdown(ctx context.Context, svc *service.Service, nc *nats.Conn, log *zap.Logger) {
	log.Info("shutting down: draining calls in flight", zap.Duration("drain_timeout", v.drain))
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.drain)
	defer cancel()
	if err := svc.Stop(stopCtx); err != nil {
		log.Warn("drain did not finish", zap.Error(err))
	}
	if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Debug("drain the connection", zap.Error(err))
	}
}

// engineIdentity is what placement asks of the driver: the daemon's ID.
type engineIdentity interface {
	EngineID(ctx context.Context) (string, error)
}

// backendReaper serves reap requests with the Docker backend's sweep; the backend reports each
// sweep to its observer, whose events publish the summary.
func backendReaper(b *actors.Backend) service.Reaper {
	return service.ReaperFunc(func(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error) {
		var opts []reaper.Option
		if scope != "" {
			opts = append(opts, reaper.WithScope(scope))
		}
		res, err := b.Reap(ctx, olderThan, opts...)
		if errors.Is(err, actors.ErrReapInProgress) {
			return sandbox.ReapResult{}, &messages.EngineUnavailableError{Subject: "reap", Reason: "a reap of this engine is already in progress"}
		}
		if err != nil {
			return sandbox.ReapResult{}, err
		}
		return res, nil
	})
}

// natsFlags are the flags of a connection to a NATS server, shared by serve and run.
type natsFlags struct {
	url, user, password, token, nkey, creds string
	ca, cert, key                           string
	prefix                                  string
}

func (c *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", envOr("MAF_SANDBOX_NATS_URL", ""), "NATS server to use (env MAF_SANDBOX_NATS_URL)")
	fs.StringVar(&c.user, "nats-user", envOr("MAF_SANDBOX_NATS_USER", ""), "NATS user (env MAF_SANDBOX_NATS_USER)")
	fs.StringVar(&c.password, "nats-password", envOr("MAF_SANDBOX_NATS_PASSWORD", ""), "NATS password (env MAF_SANDBOX_NATS_PASSWORD)")
	fs.StringVar(&c.token, "nats-token", envOr("MAF_SANDBOX_NATS_TOKEN", ""), "NATS token (env MAF_SANDBOX_NATS_TOKEN)")
	fs.StringVar(&c.nkey, "nats-nkey", envOr("MAF_SANDBOX_NATS_NKEY", ""), "file holding an NKey seed (env MAF_SANDBOX_NATS_NKEY)")
	fs.StringVar(&c.creds, "nats-creds", envOr("MAF_SANDBOX_NATS_CREDS", ""), "NATS credentials file, JWT and seed (env MAF_SANDBOX_NATS_CREDS)")
	fs.StringVar(&c.ca, "nats-ca", envOr("MAF_SANDBOX_NATS_CA", ""), "CA certificate file to verify the server (env MAF_SANDBOX_NATS_CA)")
	fs.StringVar(&c.cert, "nats-cert", envOr("MAF_SANDBOX_NATS_CERT", ""), "client certificate file for TLS (env MAF_SANDBOX_NATS_CERT)")
	fs.StringVar(&c.key, "nats-key", envOr("MAF_SANDBOX_NATS_KEY", ""), "client key file for TLS (env MAF_SANDBOX_NATS_KEY)")
	fs.StringVar(&c.prefix, "prefix", envOr("MAF_SANDBOX_PREFIX", messages.DefaultPrefix), "subject prefix of the engine pool (env MAF_SANDBOX_PREFIX)")
}

// options turns the flags into client options; at most one way of authenticating is given.
func (c *natsFlags) options(name string) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(name)}
	ways := 0
	if c.user != "" || c.password != "" {
		opts = append(opts, nats.UserInfo(c.user, c.password))
		ways++
	}
	if c.token != "" {
		opts = append(opts, nats.Token(c.token))
		ways++
	}
	if c.nkey != "" {
		o, err := nats.NkeyOptionFromSeed(c.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey: %w", err)
		}
		opts = append(opts, o)
		ways++
	}
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
		ways++
	}
	if ways > 1 {
		return nil, errors.New("give one of --nats-user/--nats-password, --nats-token, --nats-nkey and --nats-creds")
	}
	if c.ca != "" {
		opts = append(opts, nats.RootCAs(c.ca))
	}
	if (c.cert == "") != (c.key == "") {
		return nil, errors.New("--nats-cert and --nats-key go together")
	}
	if c.cert != "" {
		opts = append(opts, nats.ClientCert(c.cert, c.key))
	}
	return opts, nil
}

// connect connects to the flags' URL, or the embedded default when none is set.
func (c *natsFlags) connect(name string, log *zap.Logger) (*nats.Conn, error) {
	url := c.url
	if url == "" {
		url = defaultNATSURL
	}
	opts, err := c.options(name)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", zap.String("url", nc.ConnectedUrlRedacted())) }))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}

// engineURL is the URL a client verb connects to: --nats-url, or the embedded server's.
func (c *natsFlags) engineURL() string {
	if c.url == "" {
		return defaultNATSURL
	}
	return c.url
}

// noEngine explains a client verb's failure to reach any engine: nothing listens at the URL
// (no NATS server, so no engine either), or a NATS server answers and no engine serves the
// prefix there. Each says how to start one. Other errors pass unchanged, an engine's own
// engine_unavailable (its daemon out of reach) among them.
func (c *natsFlags) noEngine(err error) error {
	switch {
	case errors.Is(err, nats.ErrNoServers):
		hint := "start one with \"engine serve\" (its embedded NATS server listens on " + defaultListen + ")"
		if c.url != "" && c.url != defaultNATSURL {
			hint = "start one with \"engine serve --nats-url " + c.url + "\" once that server runs, or point --nats-url at the pool's server"
		}
		return fmt.Errorf("no engine answers on %s: nothing listens there; %s: %w", c.engineURL(), hint, err)
	case errors.Is(err, nats.ErrNoResponders): // the client's mark of a call no engine took
		return fmt.Errorf("no engine answers on %s: a NATS server does, but no engine serves the prefix %q there; start one with "+
			"\"engine serve --nats-url %s\" (and --prefix, when the pool uses another): %w", c.engineURL(), c.prefix, c.engineURL(), err)
	}
	return err
}

// logFlags choose the log format and level.
type logFlags struct{ format, level string }

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", envOr("MAF_SANDBOX_LOG_FORMAT", "auto"), "console, json, or auto: console on a terminal, JSON otherwise (env MAF_SANDBOX_LOG_FORMAT)")
	fs.StringVar(&l.level, "log-level", envOr("MAF_SANDBOX_LOG_LEVEL", "info"), "debug, info, warn or error (env MAF_SANDBOX_LOG_LEVEL)")
}

// logger builds the zap logger on stderr: console lines on a terminal, JSON otherwise.
func (l *logFlags) logger() (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(l.level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	format := l.format
	if format == "auto" {
		format = "json"
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = "console"
		}
	}
	var cfg zap.Config
	switch format {
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.Development = false
	case "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	default:
		return nil, fmt.Errorf("--log-format %q: want console, json or auto", l.format)
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	return cfg.Build()
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// defaultDataDir is $XDG_STATE_HOME/maf-sandbox, or ~/.local/state/maf-sandbox.
func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "maf-sandbox")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "maf-sandbox")
	}
	return filepath.Join(os.TempDir(), "maf-sandbox")
}

// fingerprinter answers the fingerprint call on an engine of its own to the same daemon,
// with the observer image observerImage.
func fingerprinter(cfg docker.Config, observerImage string, log *zap.Logger) (service.Option, error) {
	eng, err := docker.NewEngine(cfg, docker.WithLogger(log.Named("fingerprint")))
	if err != nil {
		return nil, err
	}
	f, err := fingerprint.NewFactory(eng, fingerprint.WithObserverImage(observerImage), fingerprint.WithLogger(log.Named("fingerprint")))
	if err != nil {
		return nil, err
	}
	return service.WithFingerprinter(f), nil
}

// closeEvents closes ev (nil: events off), waiting at most the drain timeout for what it
// still holds.
func (v *serveVerb) closeEvents(ctx context.Context, ev *events.Events, log *zap.Logger) {
	if ev == nil {
		return
	}
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.drain)
	defer cancel()
	if err := ev.Close(wait); err != nil {
		log.Warn("events not delivered at shutdown", zap.Error(err))
	}
}

// placement returns the service options of the engine's ID and, with placement on, of its
// store, and the closer of what it opened. Placement claims under the engine's ID, so with
// placement on the ID is settled here rather than by the service; its watch runs on a
// connection of its own, as the events do.
func (v *serveVerb) placement(ctx context.Context, dial func(name string) (*nats.Conn, error), drv docker.Driver, log *zap.Logger) ([]service.Option, func(), error) {
	if v.place.on && v.engineID == "" {
		v.engineID = nuid.Next()
	}
	var opts []service.Option
	if v.engineID != "" {
		opts = append(opts, service.WithEngineID(v.engineID))
	}
	if !v.place.on {
		return opts, func() {}, nil
	}
	placed, err := dial("maf-sandbox engine serve placement")
	if err != nil {
		return nil, nil, err
	}
	store, placeOpts, err := v.place.open(ctx, placed, v.engineID, drv, log)
	if err != nil {
		placed.Close()
		return nil, nil, err
	}
	return append(opts, placeOpts...), func() {
		store.Close()
		placed.Close()
	}, nil
}

func envInt64(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}
