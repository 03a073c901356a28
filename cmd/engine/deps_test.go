package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEngineLinksNoTestKit: the engine binary must not link a package made for tests (the
// conformance kit, the fakes, the Docker and NATS fixtures, the integration helpers); the
// fingerprint model the engine serves lives in package sandbox for that reason.
func TestEngineLinksNoTestKit(t *testing.T) {
	kits := []string{
		"github.com/mafsandbox/engine/sandbox/conformance",
		"github.com/mafsandbox/engine/sandbox/sandboxtest",
		"github.com/mafsandbox/engine/internal/dockertest",
		"github.com/mafsandbox/engine/internal/natstest",
		"github.com/mafsandbox/engine/internal/natscluster",
		"github.com/mafsandbox/engine/internal/egresstest",
		"github.com/mafsandbox/engine/internal/depcheck",
		"github.com/mafsandbox/engine/integration/internal/itest",
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["github.com/mafsandbox/engine/sandbox"] {
		t.Fatalf("go list -deps lists no package of this module: %q", out)
	}
	for _, k := range kits {
		if deps[k] {
			t.Errorf("the engine binary links the test kit %s", k)
		}
	}
}
