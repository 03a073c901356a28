package actors

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestActorsLinksNoProxy: the engine writes the proxy program's environment and reads its
// decision log through package egresslog, which owns that contract; linking the proxy program
// itself (package proxy) would put the code that faces the sandbox into every engine.
func TestActorsLinksNoProxy(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.Bytes())
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["github.com/mafsandbox/engine/egresslog"] {
		t.Fatalf("go list -deps lists no egresslog, the contract actors must use: %q", out)
	}
	if deps["github.com/mafsandbox/engine/proxy"] {
		t.Error("package actors links the proxy program (package proxy); use the contract in package egresslog")
	}
}
