package itest

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

// NewBackend builds a backend whose every container carries this run's test labels, and
// closes it when the test ends.
func NewBackend(t testing.TB, opts ...actors.Option) *actors.Backend {
	t.Helper()
	dockertest.Require(t)
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second}
	opts = append([]actors.Option{actors.WithLogger(zaptest.NewLogger(t)), actors.WithFilePlane(testFilePlane(t)), suiteExecChannel(t)}, opts...)
	b, err := actors.Create(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// testFilePlane is the file plane the suite's backends use: MAF_SANDBOX_FILE_PLANE, else auto.
// A test over every plane, or of the freeze, passes its own actors.WithFilePlane after it,
// which wins.
func testFilePlane(t testing.TB) actors.FilePlane {
	p, err := actors.ParseFilePlane(os.Getenv(actors.FilePlaneEnv))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FilePlanes are the planes a file-surface test runs over: the host plane (forced, so a
// container it cannot prove fails the test) and the archive plane; with MAF_SANDBOX_FILE_PLANE
// set, that plane alone.
func FilePlanes(t testing.TB) []actors.FilePlane {
	p, err := actors.ParseFilePlane(os.Getenv(actors.FilePlaneEnv))
	if err != nil {
		t.Fatal(err)
	}
	if p != actors.FilePlaneAuto {
		return []actors.FilePlane{p}
	}
	return []actors.FilePlane{actors.FilePlaneHost, actors.FilePlaneArchive}
}

// OnEveryPlane runs f as one subtest per file plane, each with its own backend option.
func OnEveryPlane(t *testing.T, f func(t *testing.T, plane actors.Option)) {
	for _, p := range FilePlanes(t) {
		t.Run(string(p)+"_plane", func(t *testing.T) { f(t, actors.WithFilePlane(p)) })
	}
}

// NewKey returns a key no other test uses.
func NewKey(t testing.TB) sandbox.Key {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sandbox.Key{Scope: "it-" + hex.EncodeToString(b), ThreadID: "thread", AgentID: "agent"}
}

// BusyboxSpec is a spec on the shared busybox test image.
func BusyboxSpec(t testing.TB, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	image := dockertest.Busybox(t)
	s, err := sandbox.NewSpec("shell", append([]sandbox.SpecOption{sandbox.WithImage(image)}, opts...)...)
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	return s
}

// Acquire acquires and registers the disposal of the key before checking the error.
func Acquire(t testing.TB, b sandbox.Backend, key sandbox.Key, spec sandbox.Spec) sandbox.Sandbox {
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

// Context is a context for one call of the test: it ends after 2 minutes, or with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
