package egresstest

import (
	"os/exec"
	"strings"
	"testing"
)

// The fault injection stays test-only: neither the engine's actors nor its binary link it.
func TestNotLinkedByTheEngine(t *testing.T) {
	for _, pkg := range []string{"github.com/mafsandbox/engine/actors", "github.com/mafsandbox/engine/cmd/engine"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/mafsandbox/engine/internal/egresstest" {
				t.Fatalf("%s links internal/egresstest", pkg)
			}
		}
	}
}

func TestBridgeName(t *testing.T) {
	if n, err := BridgeName("5888a2b41d1f0124ed2a6dbb0d31f9aabd2ce8b15abf6d2766d7cf34037a8138"); err != nil || n != "br-5888a2b41d1f" {
		t.Fatalf("%q %v", n, err)
	}
	if _, err := BridgeName("bridge; rm -rf /"); err == nil {
		t.Fatal("a name that is no network ID was accepted")
	}
}
