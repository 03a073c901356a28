package itest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ExecSupervisor builds the exec channel's supervisor (cmd/execd) as the engine ships it, a
// static binary, and returns it, for actors.WithExecChannel.
func ExecSupervisor(t testing.TB) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "maf-sandbox-execd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/mafsandbox/engine/cmd/execd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/execd: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
