package main

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// engine reap sweeps the real daemon: a dry run of a scope no test uses, so nothing is
// removed.
func TestReapSweepsTheDaemon(t *testing.T) {
	dockertest.Require(t)
	bin := buildEngine(t)
	r := runEngine(t, bin, nil, "reap", "--older-than", "24h", "--scope", "reap-test-"+dockertest.Session(), "--dry-run", "--json")
	if r.code != 0 {
		t.Fatalf("reap exited %d\nstderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"dry_run": true`) || !strings.Contains(r.stdout, `"failures": []`) {
		t.Fatalf("reap printed %s", r.stdout)
	}
}
