package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// newBackend builds a backend whose every container carries this run's test labels, and
// closes it when the test ends.
func newBackend(t testing.TB, opts ...actors.Option) *actors.Backend {
	t.Helper()
	dockertest.Require(t)
	cfg := docker.Config{Driver: testDriver(), Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second}
	opts = append([]actors.Option{actors.WithLogger(zaptest.NewLogger(t))}, opts...)
	b, err := actors.Create(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// testDriver is the engine driver the suite runs on: MAF_SANDBOX_TEST_DRIVER (cli or api),
// empty for the default. make test runs the package once per driver.
func testDriver() string { return os.Getenv("MAF_SANDBOX_TEST_DRIVER") }

// newKey returns a key no other test uses.
func newKey(t testing.TB) sandbox.Key {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sandbox.Key{Scope: "it-" + hex.EncodeToString(b), ThreadID: "thread", AgentID: "agent"}
}

// busyboxSpec is a spec on the shared busybox test image.
func busyboxSpec(t testing.TB, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	image := dockertest.Busybox(t)
	s, err := sandbox.NewSpec("shell", append([]sandbox.SpecOption{sandbox.WithImage(image)}, opts...)...)
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	return s
}

// acquire acquires and registers the disposal of the key before checking the error.
func acquire(t testing.TB, b sandbox.Backend, key sandbox.Key, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return sb
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
