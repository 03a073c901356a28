// Package depcheck is the helper of the tests that hold a package to the imports it may link:
// it asks the go command what a package links (go list -deps) and fails the test on a
// forbidden one. It is imported by tests only.
package depcheck

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// Rule is what one package may link.
type Rule struct {
	// Pkg is the import path of the package checked.
	Pkg string
	// Want are import paths Pkg must link. They prove the listing is the real one, so a
	// broken listing cannot pass as "nothing forbidden".
	Want []string
	// Forbid are import paths Pkg must not link; each also forbids every package under it
	// ("github.com/nats-io" forbids the whole NATS organisation).
	Forbid []string
	// Why is said with every forbidden package found: what to do instead.
	Why string
}

// Check fails t unless r.Pkg links every package of r.Want and none of r.Forbid. It lists the
// packages with the go command first on PATH, which go test puts there, so it is the toolchain
// running the test (runtime.GOROOT is deprecated for finding it).
func Check(t testing.TB, r Rule) {
	t.Helper()
	deps := List(t, r.Pkg)
	linked := make(map[string]bool, len(deps))
	for _, d := range deps {
		linked[d] = true
	}
	for _, w := range r.Want {
		if !linked[w] {
			t.Fatalf("go list -deps %s lists no %s, which it must link: %q", r.Pkg, w, deps)
		}
	}
	for _, d := range deps {
		for _, f := range r.Forbid {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s links %s; %s", r.Pkg, d, r.Why)
			}
		}
	}
}

// List returns the import paths pkg links, pkg itself last, as go list -deps prints them. It
// fails t when the go command fails or its answer does not end with pkg.
func List(t testing.TB, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.Bytes())
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != pkg {
		t.Fatalf("go list -deps %s listed %d packages and not %s last: %q", pkg, len(deps), pkg, out)
	}
	return deps
}
