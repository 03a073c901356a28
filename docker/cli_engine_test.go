package docker_test

import (
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/enginetest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// newCLI returns a CLI that puts the test session's labels on everything it creates.
func newCLI(t *testing.T, mods ...func(*docker.Config)) *docker.CLI {
	t.Helper()
	cfg := docker.Config{Labels: dockertest.Labels()}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := docker.NewCLI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCLIEngine(t *testing.T) {
	dockertest.Require(t)
	enginetest.Run(t, "cli", func(t *testing.T) docker.Engine { return newCLI(t) })
}
