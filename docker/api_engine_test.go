package docker_test

import (
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// newAPI returns the API driver, built as NewEngine builds it, putting the test session's
// labels on everything it creates.
func newAPI(t *testing.T, mods ...func(*docker.Config)) docker.Driver {
	t.Helper()
	cfg := docker.Config{Driver: docker.DriverAPI, Labels: dockertest.Labels()}
	for _, m := range mods {
		m(&cfg)
	}
	a, err := docker.NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// typeStater returns the API driver's archive-stat fast path, which NewEngine's Driver offers
// through TypeStater.
func typeStater(t *testing.T, d docker.Driver) docker.TypeStater {
	t.Helper()
	ts, ok := d.TypeStater()
	if !ok {
		t.Fatal("the API driver offers no TypeStater")
	}
	return ts
}

// execStarter returns the API driver's exec that reports its process's start, which
// NewEngine's Driver offers through ExecStarter.
func execStarter(t *testing.T, d docker.Driver) docker.ExecStarter {
	t.Helper()
	es, ok := d.ExecStarter()
	if !ok {
		t.Fatal("the API driver offers no ExecStarter")
	}
	return es
}
