package egress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// Disposing an allowlisted sandbox by its instance ID takes its proxy and its network with it
// (proxy drained first, network last, inside the sandbox's actor), and the proxy's window
// reaches the sink exactly once, after the proxy's removal.
func TestDisposeEgressByInstanceRemovesProxyAndNetwork(t *testing.T) {
	fx := newEgressFixture(t)
	sink := &recordingSink{}
	b := egressBackend(t, fx.network, actors.WithObserver(sink))
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	ctx := itest.Context(t)
	sb := itest.Acquire(t, b, key, spec)
	res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if out := strings.TrimSpace(string(res.StdoutBytes)); out != "code=200" {
		t.Fatalf("allowed host: %s", out)
	}
	proxyID := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Id}}", docker.ProxyName(n)))
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{InstanceID: sb.InstanceID()}); f != nil {
		t.Fatalf("dispose by instance: %v", f)
	}
	if err := b.AwaitTeardowns(ctx); err != nil { // the network goes after the reply
		t.Fatal(err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
	ws := sink.got()
	if len(ws) != 1 {
		t.Fatalf("windows: %+v, want exactly one", ws)
	}
	w := ws[0]
	if w.Key != key || w.ProxyID != proxyID || w.Trigger != string(egresslog.TriggerDispose) || w.Removal != "removed" ||
		len(w.Decisions) != 1 || w.Decisions[0].Decision != sandbox.DecisionAllow || w.Decisions[0].Host != allowedHost {
		t.Fatalf("window %+v", w)
	}
	// A second disposal of the gone instance is a no-op and publishes nothing more.
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{InstanceID: sb.InstanceID()}); f != nil {
		t.Fatalf("second dispose: %v", f)
	}
	if got := len(sink.got()); got != 1 {
		t.Fatalf("%d windows after the second dispose, want 1", got)
	}
}

// A scope purge takes an allowlisted sandbox down whole too, counting the workload only.
func TestDisposeEgressScopePurgeRemovesProxyAndNetwork(t *testing.T) {
	dockertest.Require(t)
	if err := images.EnsureProxy(itest.Context(t), "docker", images.ProxyTag); err != nil {
		t.Fatalf("build the proxy image: %v", err)
	}
	b := egressBackend(t, "", actors.WithObserver(&recordingSink{}))
	key := itest.NewKey(t)
	spec := allowlistSpec(t, dockertest.Busybox(t), allowedHost)
	n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	itest.Acquire(t, b, key, spec)
	p := b.DisposeScope(itest.Context(t), key.Scope, key.ThreadID)
	if p.Disposed != 1 || p.Undisposed != nil {
		t.Fatalf("purge = %+v, want one sandbox and no failure", p)
	}
	if err := b.AwaitTeardowns(itest.Context(t)); err != nil { // the network goes after the reply
		t.Fatal(err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
}

// An engine that dies in the middle of a disposal — after the proxy went, before the network
// did — leaves the sandbox's network behind, with or without its workload. A later disposal
// of the key or the conversation, by a fresh backend that never saw the sandbox, finds the
// network by its labels and removes it.
func TestDisposeAfterACrashMidDisposeRemovesTheNetwork(t *testing.T) {
	dockertest.Require(t)
	if err := images.EnsureProxy(itest.Context(t), "docker", images.ProxyTag); err != nil {
		t.Fatalf("build the proxy image: %v", err)
	}
	for _, tc := range []struct {
		name         string
		keepWorkload bool
		scope        bool
	}{
		{name: "key, workload gone"},
		{name: "key, workload left", keepWorkload: true},
		{name: "scope, workload gone", scope: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := itest.NewKey(t)
			spec := allowlistSpec(t, dockertest.Busybox(t), allowedHost)
			n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
			dockertest.CleanupNetwork(t, docker.NetworkName(n)) // registered first: runs after the containers' removal
			t.Cleanup(func() {
				_, _, _ = dockertest.DockerErr(context.Background(), "rm", "--force", n, docker.ProxyName(n))
			})
			itest.Acquire(t, egressBackend(t, ""), key, spec)
			// The layout the crash leaves: the proxy removed, the workload too unless kept, the
			// network still there with the labels the engine gave it.
			gone := []string{"rm", "--force", docker.ProxyName(n)}
			if !tc.keepWorkload {
				gone = append(gone, n)
			}
			dockertest.Docker(t, gone...)
			if strings.TrimSpace(dockertest.Docker(t, "network", "ls", "--quiet", "--filter", "name="+docker.NetworkName(n))) == "" {
				t.Fatalf("the network %s is not there to begin with", docker.NetworkName(n))
			}

			b := egressBackend(t, "")
			ctx := itest.Context(t)
			if tc.scope {
				if p := b.DisposeScope(ctx, key.Scope, key.ThreadID); p.Undisposed != nil {
					t.Fatalf("purge = %+v", p)
				}
			} else if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
				t.Fatalf("dispose: %v", f)
			}
			if err := b.AwaitTeardowns(ctx); err != nil { // the network goes after the reply
				t.Fatal(err)
			}
			if left := leftovers(t, n); left != "" {
				t.Fatalf("left behind: %s", left)
			}
		})
	}
}
