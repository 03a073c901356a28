package demo

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/cmd/engine/internal/embedded"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/cmd/engine/internal/version"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
	"github.com/mafsandbox/engine/telemetry"
)

// verb is "engine demo": the engine on its embedded defaults — an embedded NATS server on
// loopback, the service over the local Docker daemon — and a scripted agent played against it
// through the Go client, the way a host in another process drives it: acquire, write a
// program, run it, read its output back, dispose, and show that nothing was left behind.
type verb struct {
	image, dockerPath string
	pythonImage       string
	verbose           bool
	consoleListen     string
	consoleLinger     time.Duration
	labels            settings.Labels
	pool              int // the warm pool of image (pool.go)
	execChannel       bool
}

// Command is "engine demo": it parses args (the flags after the verb), starts the engine and
// plays the agent against it, printing each step; everything it started is stopped before it
// returns. -h prints the flags and returns [flag.ErrHelp].
func Command(ctx context.Context, args []string) error {
	v := &verb{labels: settings.Labels{}}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *verb) parse(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&v.image, "image", images.BusyboxTag, "workload image; built when it is the default and missing")
	fs.StringVar(&v.pythonImage, "python-image", images.PythonTag, "image of the codeact step (python3, sh, setsid, nohup); built with debootstrap when it is the default and missing; empty skips the step")
	fs.StringVar(&v.dockerPath, "docker", "docker", "the Docker CLI binary")
	fs.BoolVar(&v.verbose, "v", false, "log the engine's work")
	fs.StringVar(&v.consoleListen, "console", "127.0.0.1:0", "serve the operator console for the demo's engine at this loopback address; empty serves none")
	fs.DurationVar(&v.consoleLinger, "console-linger", 0, "keep the engine and its console up this long after the agent is done")
	fs.Var(v.labels, "label", "extra label k=v on every container the demo creates; repeatable")
	fs.IntVar(&v.pool, "warm-pool", 1, "keep this many sandboxes of --image started ahead (the pooled acquire step); 0 skips the step")
	fs.BoolVar(&v.execChannel, "exec-channel", true, "give closed sandboxes the exec channel's supervisor, as engine serve does by default: commands skip docker exec")
	return settings.ParseFlags(fs, args)
}

// step prints one step of the demo.
func step(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }

// run starts the engine, then plays the agent against it.
func (v *verb) run(ctx context.Context) error {
	if v.image == images.BusyboxTag {
		if err := images.EnsureBusybox(ctx, v.dockerPath, v.image, images.WithBuildNotice(func() {
			step("building the workload image %s from Debian's busybox-static (nothing is pulled)", v.image)
		})); err != nil {
			return err
		}
	}
	log := zap.NewNop()
	if v.verbose {
		log, _ = zap.NewDevelopment()
	}
	eng, err := v.startEngine(ctx, log)
	defer eng.close()
	if err != nil {
		return err
	}
	var consoleURL string
	if v.consoleListen != "" {
		if consoleURL, err = startConsole(eng, v.consoleListen, log); err != nil {
			return err
		}
		step("the operator console watches this engine at %s", consoleURL)
	}
	// The agent's host: a NATS client, as a host in any language would be.
	agentConn, err := nats.Connect(eng.url, nats.Name("demo-agent"))
	if err != nil {
		return err
	}
	defer agentConn.Close()
	remote, err := client.New(ctx, agentConn, client.WithLogger(log))
	if err != nil {
		return err
	}
	poolKey := sandbox.Key{Scope: scope, ThreadID: fmt.Sprintf("pool%d", time.Now().UnixNano()), AgentID: "coder"}
	if err := poolStep(ctx, step, remote, eng.backend, v.image, poolKey); err != nil {
		return err
	}
	if err := v.agent(ctx, agentConn, remote, eng.target); err != nil {
		return err
	}
	if err := sleepStep(ctx, step, remote, v.image, v.dockerPath); err != nil { // sleep.go
		return fmt.Errorf("sleep step: %w", err)
	}
	if err := auditTrail(ctx, step, agentConn, eng.events, scope); err != nil {
		return err
	}
	if err := metricsLine(ctx, step, eng.metrics.Addr()); err != nil {
		return err
	}
	lingerForConsole(ctx, consoleURL, v.consoleLinger)
	return nil
}

// scope is the scope of the demo's conversation.
const scope = "demo"

// engine is the engine the demo started, and what stops it, in reverse order of start.
type engine struct {
	url     string
	target  *target
	events  *events.Events
	metrics *telemetry.Prometheus
	backend *actors.Backend // for the warm pool step
	closers []func()
}

func (e *engine) onClose(f func()) { e.closers = append(e.closers, f) }

func (e *engine) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// startEngine starts the engine: an embedded NATS server, a target server of ours for the
// allowlisted step, the Docker backend behind a router, the service. What it started is
// stopped by the returned engine's close, on failure too.
func (v *verb) startEngine(ctx context.Context, log *zap.Logger) (*engine, error) {
	eng := &engine{}
	dataDir, err := os.MkdirTemp("", "maf-sandbox-demo-")
	if err != nil {
		return eng, err
	}
	eng.onClose(func() { os.RemoveAll(dataDir) })
	srv, err := embedded.Start("127.0.0.1:0", dataDir, log)
	if err != nil {
		return eng, err
	}
	eng.onClose(srv.Shutdown)
	eng.url = srv.ClientURL()
	cfg := docker.Config{DockerPath: v.dockerPath, Labels: v.labels}
	step("starting a target server of ours on a private network for the allowlisted step")
	if eng.target, err = startTarget(ctx, v.dockerPath, v.labels); err != nil {
		return eng, err
	}
	eng.onClose(eng.target.stop)
	cfg = eng.target.egressConfig(cfg)
	engineConn, err := nats.Connect(eng.url, nats.Name("maf-sandbox-engine"))
	if err != nil {
		return eng, err
	}
	eng.onClose(engineConn.Close)
	// Events go on a connection of their own: JetStream's acknowledgement subscription must not
	// count among the service's, whose stop waits for its own to drain.
	eventsConn, err := nats.Connect(eng.url, nats.Name("maf-sandbox-engine events"))
	if err != nil {
		return eng, err
	}
	eng.onClose(eventsConn.Close)
	if eng.metrics, err = telemetry.NewPrometheus("127.0.0.1:0", log); err != nil {
		return eng, err
	}
	eng.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := eng.metrics.Close(ctx); err != nil {
			log.Warn("stop the metrics endpoint", zap.Error(err))
		}
	})
	backend, err := v.backend(ctx, eng, cfg, eventsConn, log)
	if err != nil {
		return eng, err
	}
	// The events and the metrics observe every act, as the router and the backend report it.
	router, err := sandbox.NewRouter([]sandbox.Backend{backend}, sandbox.WithMinIsolation(sandbox.IsolationContainer), sandbox.WithLogger(log),
		sandbox.WithObserver(sandbox.Observers(eng.events, eng.metrics.Metrics())))
	if err != nil {
		return eng, err
	}
	svc, err := service.New(engineConn, router, service.WithLogger(log), service.WithVersion(version.Build()),
		service.WithMetrics(eng.metrics.Metrics()))
	if err != nil {
		return eng, err
	}
	eng.onClose(func() { _ = svc.Stop(context.WithoutCancel(ctx)) })
	step("engine serving on embedded NATS at %s (engine %s); the router admits the docker backend at isolation %q",
		eng.url, svc.EngineID(), backend.Isolation())
	return eng, nil
}

// backend creates the Docker backend and the events on eventsNC, whose daemon it is; eng
// closes both, the backend first (it still hands the events the windows it drains).
func (v *verb) backend(ctx context.Context, eng *engine, cfg docker.Config, eventsNC *nats.Conn, log *zap.Logger) (*actors.Backend, error) {
	drv, err := docker.NewEngine(cfg, docker.WithLogger(log))
	if err != nil {
		return nil, err
	}
	planeOpt, err := settings.FilePlane()
	if err != nil {
		return nil, err
	}
	opts := []actors.Option{actors.WithEngine(drv), actors.WithLogger(log), planeOpt,
		actors.WithEgressUpstreamCAs(eng.target.caPEM)} // the inspected demo host is verified against the target's CA
	if store, err := events.NewSnapshots(ctx, eventsNC); err == nil { // sleep.go's fork
		opts = append(opts, actors.WithSnapshotStore(store))
	} else {
		step("snapshots off: their object store cannot be made (%v)", err)
	}
	if v.pool > 0 {
		opts = append(opts, actors.WithWarmPool(v.image, v.pool))
	}
	if v.execChannel {
		execd, err := images.ExecSupervisor(ctx, v.dockerPath)
		if err != nil {
			step("exec channel off (%v): commands take docker exec", err)
		} else {
			opts = append(opts, actors.WithExecChannel(execd))
		}
	}
	store, err := events.NewProcessStreams(eventsNC, events.WithProcessLogger(log)) // processes' output on JetStream: the process step reads it back
	if err != nil {
		return nil, err
	}
	opts = append(opts, actors.WithProcessStore(store))
	backend, err := actors.Create(ctx, cfg, opts...)
	if err != nil {
		return nil, err
	}
	ev, err := events.New(ctx, eventsNC, events.WithDaemon(backend), events.WithLogger(log))
	if err != nil {
		backend.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	eng.backend, eng.events = backend, ev
	eng.onClose(func() {
		backend.Close(context.WithoutCancel(ctx))
		_ = ev.Close(context.WithoutCancel(ctx))
	})
	return backend, nil
}

// agent is the scripted agent: acquire, work in the sandbox, the allowlisted step when the
// engine serves it, dispose, and look for anything left behind.
func (v *verb) agent(ctx context.Context, agentConn *nats.Conn, remote *client.Backend, t *target) error {
	d := remote.Declarations()
	step("client sees backend %q, egress %v, capabilities %s", remote.Name(), d.EgressModes.Sorted(), d.EffectiveCapabilities())

	key := sandbox.Key{Scope: scope, ThreadID: fmt.Sprintf("t%d", time.Now().UnixNano()), AgentID: "coder"}
	spec, err := sandbox.NewSpec("codeact", sandbox.WithImage(v.image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete),
		sandbox.WithDeclaredOutputs(sandbox.Output("out/report.txt")))
	if err != nil {
		return err
	}
	defer remote.DisposeScope(context.WithoutCancel(ctx), key.Scope, key.ThreadID)
	start := time.Now()
	sb, err := remote.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	step("acquired sandbox %.12s over NATS in %s (closed egress: --network none)", sb.InstanceID(), time.Since(start).Round(time.Millisecond))
	if err := work(ctx, sb, spec); err != nil {
		return err
	}
	if err := processStep(ctx, step, agentConn.ConnectedUrl(), sb, key, spec); err != nil {
		return fmt.Errorf("process step: %w", err)
	}
	if !d.EgressModes.Has(sandbox.EgressAllowlist) {
		step("allowlisted egress is not served here: the daemon is not a Linux daemon the engine can seal an internal network on, " +
			"so no egress events are produced")
	} else if err := egressStep(ctx, step, agentConn, remote, t); err != nil {
		return err
	}
	if v.pythonImage != "" {
		if err := codeactStep(ctx, step, remote, agentConn, key, v.pythonImage, v.dockerPath); err != nil {
			return fmt.Errorf("codeact step: %w", err)
		}
	}

	if f := remote.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		return fmt.Errorf("dispose: %v", f)
	}
	purge := remote.DisposeScope(ctx, key.Scope, key.ThreadID)
	left, err := exec.CommandContext(ctx, v.dockerPath, "ps", "-aq", "--filter", "label="+label.Scope+"="+label.Value(key.Scope),
		"--filter", "label="+label.Thread+"="+label.Value(key.ThreadID)).Output()
	if err != nil {
		return err
	}
	step("disposed; a scope purge afterwards finds %d more sandboxes, and docker ps lists %d containers of this conversation — nothing was left behind",
		purge.Disposed, len(strings.Fields(string(left))))
	return nil
}

// work is the agent's work in the sandbox: write a program, run it, collect its declared
// output, and show what the sandbox refuses and what network it has.
func work(ctx context.Context, sb sandbox.Sandbox, spec sandbox.Spec) error {
	program := "#!/bin/sh\nmkdir -p out\necho \"hello from $(uname -s), user $(id -u)\" > out/report.txt\nls / | wc -l >> out/report.txt\n"
	if err := sb.WriteFile(ctx, "agent.sh", []byte(program), "."); err != nil {
		return err
	}
	step("wrote agent.sh (%d bytes) into the storage base", len(program))
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "agent.sh"), ".", 30*time.Second)
	if err != nil {
		return err
	}
	step("ran it: exit %d", res.ExitCode)
	sink := &sandbox.OutputSink{Deliver: func(_ context.Context, a sandbox.Artifact) (sandbox.LandedArtifact, error) {
		step("collected %s (%d bytes):\n%s", a.Name, len(a.Content), indent(string(a.Content)))
		return sandbox.LandedArtifact{Name: a.Name, Display: a.Name}, nil
	}}
	if _, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil); err != nil {
		return err
	}
	if _, err := sb.ReadFile(ctx, "/etc/passwd", ".", 1<<20); err != nil {
		step("reading /etc/passwd from the storage base is refused: %v", err)
	}
	if res, err := sb.Exec(ctx, sandbox.Shell("ls /sys/class/net"), ".", 30*time.Second); err == nil {
		step("the sandbox's network interfaces: %s — loopback only, no route out", strings.Join(strings.Fields(res.Stdout()), " "))
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
