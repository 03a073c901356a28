package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// engine reap takes --driver as serve and bench do: a driver it does not know is refused
// before any daemon call, and each of the two sweeps the real daemon (a dry run of a scope
// no test uses, so nothing is removed).
func TestReapTakesTheDriver(t *testing.T) {
	if err := reapCmd(t.Context(), []string{"--older-than", "24h", "--driver", "bogus"}); !errors.Is(err, docker.ErrInvalid) {
		t.Fatalf("reap --driver bogus = %v, want docker.ErrInvalid", err)
	}
	dockertest.Require(t)
	bin := buildEngine(t)
	for _, driver := range []string{docker.DriverAPI, docker.DriverCLI} {
		t.Run(driver, func(t *testing.T) {
			r := runEngine(t, bin, nil, "reap", "--older-than", "24h", "--scope", "reap-driver-test-"+dockertest.Session(),
				"--dry-run", "--json", "--driver", driver)
			if r.code != 0 {
				t.Fatalf("reap --driver %s exited %d\nstderr: %s", driver, r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, `"dry_run": true`) || !strings.Contains(r.stdout, `"failures": []`) {
				t.Fatalf("reap --driver %s printed %s", driver, r.stdout)
			}
		})
	}
}
