package docker_test

import (
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// newAPI returns an API that puts the test session's labels on everything it creates.
func newAPI(t *testing.T, mods ...func(*docker.Config)) *docker.API {
	t.Helper()
	cfg := docker.Config{Labels: dockertest.Labels()}
	for _, m := range mods {
		m(&cfg)
	}
	a, err := docker.NewAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
