package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// The tests of this package that talk to the daemon (engine_*_test.go, api_*_test.go) hold the
// engine to its contract, one concern a file: containers (lifecycle), labels, exec, files (the
// tar plane), events and fingerprinting.

func TestMain(m *testing.M) { dockertest.Main(m) }

// newEngine returns the engine, built as NewEngine builds it, putting the test session's
// labels on everything it creates.
func newEngine(t testing.TB, mods ...func(*docker.Config)) *docker.Engine {
	t.Helper()
	cfg := docker.Config{Labels: dockertest.Labels()}
	for _, m := range mods {
		m(&cfg)
	}
	e, err := docker.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// callTimeout bounds each engine call a test makes.
const callTimeout = 60 * time.Second

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// testKey returns a key no other test shares.
func testKey(t testing.TB) sandbox.Key {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return sandbox.Key{Scope: "enginetest", ThreadID: t.Name() + "-" + hex.EncodeToString(b), AgentID: "agent"}
}

// workload creates a workload container for key with the labels and hardening a real acquire
// uses, plus opts, and returns its name and ID. Its removal is registered before the create.
func workload(t testing.TB, e *docker.Engine, image string, key sandbox.Key, opts ...docker.CreateOpt) (string, string) {
	t.Helper()
	name := docker.ContainerName(key, "busybox", "")
	labels, err := label.Workload(key, "busybox", map[string]string{"suite": "enginetest"}, "/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	all := append(docker.DefaultConfig().WorkloadOpts(), docker.WithLabels(labels...))
	spec := docker.NewCreateSpec(name, image, append(all, opts...)...)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if _, err := e.Remove(c, name); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	})
	id, err := e.Run(testCtx(t), spec)
	if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	return name, id
}
