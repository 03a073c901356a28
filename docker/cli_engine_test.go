package docker_test

import (
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/enginetest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }

// newCLI returns the CLI driver, built as NewEngine builds it, putting the test session's
// labels on everything it creates.
func newCLI(t *testing.T, mods ...func(*docker.Config)) docker.Driver {
	t.Helper()
	cfg := docker.Config{Driver: docker.DriverCLI, Labels: dockertest.Labels()}
	for _, m := range mods {
		m(&cfg)
	}
	c, err := docker.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEngine holds both drivers to the one shared suite, each built the way NewEngine builds
// it for its Config.Driver, so the two cannot drift.
func TestEngine(t *testing.T) {
	dockertest.Require(t)
	for _, driver := range []string{docker.DriverCLI, docker.DriverAPI} {
		enginetest.Run(t, driver, func(t *testing.T) docker.Engine {
			e, err := docker.NewEngine(docker.Config{Driver: driver, Labels: dockertest.Labels()})
			if err != nil {
				t.Fatal(err)
			}
			return e
		})
	}
}
