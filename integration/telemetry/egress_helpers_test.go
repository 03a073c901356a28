package telemetry

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// deniedHost is a name the fetcher's allowlist does not hold: its proxy refuses it (a DENY
// decision) before resolving or dialing anything, so the test needs no target.
const (
	allowedHost = "allowed.maf-e2e.example"
	deniedHost  = "denied.maf-e2e.example"
)

// egressImages builds the egress proxy and the workload client image when missing.
func egressImages(t *testing.T) {
	t.Helper()
	ctx := itest.Context(t)
	for _, err := range []error{images.EnsureProxy(ctx, "docker", images.ProxyTag), images.EnsureClient(ctx, "docker", dockertest.Busybox(t))} {
		if err != nil {
			t.Fatalf("build images: %v", err)
		}
	}
}

// egressCleanup is a backend that serves allowlists, only to dispose whatever a test leaves
// (its proxy and network included).
func egressCleanup(t *testing.T) *actors.Backend {
	t.Helper()
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second, EgressProxyImage: images.ProxyTag}
	b, err := actors.Create(context.Background(), cfg, actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// fetcherSpec is an allowlisted sandbox of kind "fetcher" on the client image, allowed to
// reach allowedHost only.
func fetcherSpec(t *testing.T) sandbox.Spec {
	t.Helper()
	s, err := sandbox.NewSpec("fetcher", sandbox.WithImage(images.ClientTag), sandbox.WithAllowlist(sandbox.EgressRule{Host: allowedHost}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fetchDenied asks sb's proxy for deniedHost, which it refuses.
func fetchDenied(t *testing.T, ctx context.Context, sb sandbox.Sandbox) {
	t.Helper()
	res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+deniedHost+"/", ""), "/", time.Minute)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if out := string(res.Stdout()); out == "code=200\n" {
		t.Fatalf("the proxy let a denied host through: %s", out)
	}
}
