package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// Every workload runs with no capability, whichever way its commands go: on the exec
// channel (the supervisor is its first process) and through docker exec. The container is
// created with every capability dropped and none given back, and the engine's own work
// (write, stat, read, remove, reclaim as root with the reach rule) still succeeds.
func TestWorkloadsHoldNoCapability(t *testing.T) {
	for _, tc := range []struct {
		name    string
		execd   func(t *testing.T) []byte
		channel bool
	}{
		{"exec channel", func(t *testing.T) []byte { return itest.ExecSupervisor(t) }, true},
		{"docker exec", func(*testing.T) []byte { return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := itest.NewBackend(t, actors.WithExecChannel(tc.execd(t)))
			key := itest.NewKey(t)
			spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete, sandbox.Reclaim))
			sb := itest.Acquire(t, b, key, spec)
			name := sb.(*actors.Sandbox).ContainerName()
			got := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{json .HostConfig.CapDrop}} {{json .HostConfig.CapAdd}}", name))
			if got != `["ALL"] null` {
				t.Fatalf("created with CapDrop CapAdd %s, want every capability dropped and none added", got)
			}
			channelBefore, _ := b.ExecPaths()
			itest.NoCapabilities(t, sb)
			if channelAfter, _ := b.ExecPaths(); (channelAfter > channelBefore) != tc.channel {
				t.Fatalf("exec paths: channel %d → %d, want the channel used: %v", channelBefore, channelAfter, tc.channel)
			}
			ctx := itest.Context(t)
			if err := sb.WriteFile(ctx, "d/f.txt", []byte("x"), ""); err != nil {
				t.Fatalf("write: %v", err)
			}
			if body, err := sb.ReadFile(ctx, "d/f.txt", "", 10); err != nil || string(body) != "x" {
				t.Fatalf("read %q, %v", body, err)
			}
			if err := sb.Remove(ctx, "d/f.txt", "", false); err != nil {
				t.Fatalf("remove: %v", err)
			}
			if err := sb.Reclaim(ctx, sb.(*actors.Sandbox).WorkDir()+"/d", "", time.Minute); err != nil {
				t.Fatalf("reclaim: %v", err)
			}
		})
	}
}

// A capability an operator gives back (--cap-add KILL) reaches the container, and is the only
// one a command in it holds: its bounding set is that one bit (CAP_KILL, bit 5).
func TestACapabilityGivenBackIsTheOnlyOne(t *testing.T) {
	dockertest.Require(t)
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second, CapAdd: []string{"KILL"}}
	b, err := actors.Create(context.Background(), cfg, actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	name := sb.(*actors.Sandbox).ContainerName()
	got := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{json .HostConfig.CapDrop}} {{json .HostConfig.CapAdd}}", name))
	if got != `["ALL"] ["KILL"]` && got != `["ALL"] ["CAP_KILL"]` { // 20.10 records the kernel's spelling
		t.Fatalf("created with CapDrop CapAdd %s, want ALL dropped and KILL given back", got)
	}
	if out := itest.Sh(t, sb, "grep ^CapBnd /proc/self/status"); !strings.Contains(out, "0000000000000020") {
		t.Fatalf("bounding set %q, want CAP_KILL alone", out)
	}
}

// A spec asks for less memory, CPU and processes than the operator's bounds and gets exactly
// that; one that asks for more is refused over NATS with the typed error, before anything is
// created; one that asks nothing gets the operator's bounds.
func TestSpecResourcesWithinTheOperatorsBounds(t *testing.T) {
	dockertest.Require(t)
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second, Memory: "512m", PidsLimit: 100}
	b, err := actors.Create(context.Background(), cfg, actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	srv := natstest.Run(t)
	itest.ServeBackend(t, srv, b)
	remote := (&itest.NATSEngine{Server: srv, Backend: b}).Remote(t)
	hostConfig := func(key sandbox.Key, kind string) string {
		t.Helper()
		return strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}}",
			docker.ContainerName(key, kind, "")))
	}

	over := itest.BusyboxSpec(t, sandbox.WithResources(sandbox.Resources{Pids: 101}))
	key := itest.NewKey(t)
	_, err = remote.Acquire(itest.Context(t), key, over)
	var re *sandbox.ResourcesNotPermittedError
	if !errors.As(err, &re) || !errors.Is(err, sandbox.ErrRefused) || re.Resource != "pids" || re.Permitted != "100" {
		t.Fatalf("acquire asking 101 pids of 100: %v, want a ResourcesNotPermittedError naming pids", err)
	}
	if _, _, err := dockertest.DockerErr(itest.Context(t), "inspect", docker.ContainerName(key, over.Kind, "")); err == nil {
		t.Fatal("a refused ask left a container")
	}
	overMemory := itest.BusyboxSpec(t, sandbox.WithResources(sandbox.Resources{MemoryBytes: 513 << 20}))
	if _, err := remote.Acquire(itest.Context(t), itest.NewKey(t), overMemory); !errors.As(err, &re) || re.Resource != "memory_bytes" {
		t.Fatalf("acquire asking 513 MiB of 512: %v, want a ResourcesNotPermittedError naming memory_bytes", err)
	}

	less := itest.BusyboxSpec(t, sandbox.WithResources(sandbox.Resources{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 64}))
	key = itest.NewKey(t)
	itest.AcquireRemote(t, remote, b, key, less)
	if got, want := hostConfig(key, less.Kind), "268435456 500000000 64"; got != want {
		t.Fatalf("memory, nano-CPUs, pids = %s, want %s", got, want)
	}
	plain := itest.BusyboxSpec(t)
	key = itest.NewKey(t)
	itest.AcquireRemote(t, remote, b, key, plain)
	if got, want := hostConfig(key, plain.Kind), "536870912 0 100"; got != want {
		t.Fatalf("memory, nano-CPUs, pids = %s, want the operator's bounds %s", got, want)
	}
}
