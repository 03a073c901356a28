package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// demoCmd plays a scripted agent against the local Docker engine through the router, the
// way a host embeds the engine: acquire, write a program, run it, read its output back,
// dispose, and show that nothing was left behind.
func demoCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	image := fs.String("image", images.BusyboxTag, "workload image; built when it is the default and missing")
	dockerPath := fs.String("docker", "docker", "the Docker CLI binary")
	verbose := fs.Bool("v", false, "log the engine's work")
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
	backend, err := actors.Create(ctx, docker.Config{DockerPath: *dockerPath}, actors.WithLogger(log))
	if err != nil {
		return err
	}
	defer backend.Close(context.WithoutCancel(ctx))
	router, err := sandbox.NewRouter([]sandbox.Backend{backend}, sandbox.WithMinIsolation(sandbox.IsolationContainer), sandbox.WithLogger(log))
	if err != nil {
		return err
	}
	step("the router admits the docker backend at isolation %q (its default floor, microvm, would refuse it)", backend.Isolation())

	key := sandbox.Key{Scope: "demo", ThreadID: fmt.Sprintf("t%d", time.Now().UnixNano()), AgentID: "coder"}
	spec, err := sandbox.NewSpec("codeact", sandbox.WithImage(*image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete),
		sandbox.WithDeclaredOutputs(sandbox.Output("out/report.txt")))
	if err != nil {
		return err
	}
	defer router.DisposeScope(context.WithoutCancel(ctx), key.Scope, key.ThreadID)
	start := time.Now()
	sb, err := router.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	step("acquired sandbox %.12s in %s (closed egress: --network none)", sb.InstanceID(), time.Since(start).Round(time.Millisecond))

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
	if res, err := sb.Exec(ctx, sandbox.Shell("wget -q -T 3 -O - http://example.com || echo no network"), ".", 30*time.Second); err == nil {
		step("the sandbox has no network: %s", strings.TrimSpace(res.Stdout()))
	}
	step("allowlisted egress: %s", allowlistNote(backend))

	if f := router.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		return fmt.Errorf("dispose: %v", f)
	}
	purge := router.DisposeScope(ctx, key.Scope, key.ThreadID)
	step("disposed; a scope purge afterwards finds %d more sandboxes — nothing was left behind", purge.Disposed)
	return nil
}

func allowlistNote(b *actors.Backend) string {
	if b.Declarations().EgressModes.Has(sandbox.EgressAllowlist) {
		return "available"
	}
	return "not served here — no egress proxy image is configured (and allowlists with hosts need Docker Engine 28.0.0+ for isolated bridge gateways)"
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
