package main

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
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// demoCmd runs the engine on its embedded defaults — an embedded NATS server on loopback,
// the service over the local Docker daemon — and plays a scripted agent against it through
// the Go client, the way a host in another process drives it: acquire, write a program, run
// it, read its output back, dispose, and show that nothing was left behind.
func demoCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	image := fs.String("image", images.BusyboxTag, "workload image; built when it is the default and missing")
	pythonImage := fs.String("python-image", images.PythonTag, "image of the codeact step (python3, sh, setsid, nohup); built with debootstrap when it is the default and missing; empty skips the step")
	dockerPath := fs.String("docker", "docker", "the Docker CLI binary")
	verbose := fs.Bool("v", false, "log the engine's work")
	labels := labelFlag{}
	fs.Var(labels, "label", "extra label k=v on every container the demo creates; repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	step := func(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }
	if *image == images.BusyboxTag {
		step("building the workload image %s from Debian's busybox-static (nothing is pulled)", *image)
		if err := images.EnsureBusybox(ctx, *dockerPath, *image); err != nil {
			return err
		}
	}
	log := zap.NewNop()
	if *verbose {
		log, _ = zap.NewDevelopment()
	}

	// The engine: an embedded NATS server, the Docker backend behind a router, the service.
	dataDir, err := os.MkdirTemp("", "maf-sandbox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	srv, err := startEmbedded("127.0.0.1:0", dataDir, log)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	cfg := docker.Config{DockerPath: *dockerPath, Labels: labels}
	step("starting a target server of ours on a private network for the allowlisted step")
	target, err := startDemoTarget(ctx, *dockerPath, labels)
	if err != nil {
		return err
	}
	defer target.stop()
	cfg = target.egressConfig(cfg)
	engineConn, err := nats.Connect(srv.ClientURL(), nats.Name("maf-sandbox-engine"))
	if err != nil {
		return err
	}
	defer engineConn.Close()
	// Events go on a connection of their own: JetStream's acknowledgement subscription must not
	// count among the service's, whose stop waits for its own to drain.
	eventsConn, err := nats.Connect(srv.ClientURL(), nats.Name("maf-sandbox-engine events"))
	if err != nil {
		return err
	}
	defer eventsConn.Close()
	drv, err := docker.NewEngine(cfg, docker.WithLogger(log))
	if err != nil {
		return err
	}
	box, egressSink, err := egressEvents(ctx, eventsConn, drv, egresslog.DefaultSubjectPrefix, log)
	if err != nil {
		return err
	}
	defer box.Close(context.WithoutCancel(ctx))
	backend, err := actors.Create(ctx, cfg, actors.WithEngine(drv), actors.WithLogger(log), actors.WithEgressSink(egressSink))
	if err != nil {
		return err
	}
	defer backend.Close(context.WithoutCancel(ctx))
	router, err := sandbox.NewRouter([]sandbox.Backend{backend}, sandbox.WithMinIsolation(sandbox.IsolationContainer), sandbox.WithLogger(log))
	if err != nil {
		return err
	}
	svc, err := service.New(engineConn, router, service.WithLogger(log), service.WithVersion(buildVersion()))
	if err != nil {
		return err
	}
	defer svc.Stop(context.WithoutCancel(ctx))
	step("engine serving on embedded NATS at %s (engine %s); the router admits the docker backend at isolation %q",
		srv.ClientURL(), svc.EngineID(), backend.Isolation())

	// The agent's host: a NATS client, as a host in any language would be.
	agentConn, err := nats.Connect(srv.ClientURL(), nats.Name("demo-agent"))
	if err != nil {
		return err
	}
	defer agentConn.Close()
	remote, err := client.New(ctx, agentConn, client.WithLogger(log))
	if err != nil {
		return err
	}
	d := remote.Declarations()
	step("client sees backend %q, egress %v, capabilities %s", remote.Name(), d.EgressModes.Sorted(), d.EffectiveCapabilities())

	key := sandbox.Key{Scope: "demo", ThreadID: fmt.Sprintf("t%d", time.Now().UnixNano()), AgentID: "coder"}
	spec, err := sandbox.NewSpec("codeact", sandbox.WithImage(*image),
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
	if !d.EgressModes.Has(sandbox.EgressAllowlist) {
		step("allowlisted egress is not served here: the daemon is not a Linux daemon the engine can seal an internal network on, " +
			"so no egress events are produced")
	} else if err := demoEgress(ctx, step, agentConn, remote, target); err != nil {
		return err
	}

	if *pythonImage != "" {
		if err := codeactStep(ctx, step, remote, agentConn, key, *pythonImage, *dockerPath); err != nil {
			return fmt.Errorf("codeact step: %w", err)
		}
	}

	if f := remote.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		return fmt.Errorf("dispose: %v", f)
	}
	purge := remote.DisposeScope(ctx, key.Scope, key.ThreadID)
	left, err := exec.CommandContext(ctx, *dockerPath, "ps", "-aq", "--filter", "label="+label.Scope+"="+label.Value(key.Scope),
		"--filter", "label="+label.Thread+"="+label.Value(key.ThreadID)).Output()
	if err != nil {
		return err
	}
	step("disposed; a scope purge afterwards finds %d more sandboxes, and docker ps lists %d containers of this conversation — nothing was left behind",
		purge.Disposed, len(strings.Fields(string(left))))
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
