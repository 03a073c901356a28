package itest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mafsandbox/engine/actors"
)

// EnvExecSupervisor names a built supervisor (cmd/execd) that every backend of the suite
// gets, so the whole suite can run with commands on the exec channel: `go build -o F
// ./cmd/execd` (CGO_ENABLED=0), then the tests with MAF_SANDBOX_EXEC_SUPERVISOR=F. Unset,
// backends take docker exec unless a test gives them the channel itself.
const EnvExecSupervisor = "MAF_SANDBOX_EXEC_SUPERVISOR"

// suiteExecChannel is the backend option of [EnvExecSupervisor]: the channel with that
// binary, or none (a nil binary leaves the option's default).
func suiteExecChannel(t testing.TB) actors.Option {
	path := os.Getenv(EnvExecSupervisor)
	if path == "" {
		return actors.WithExecChannel(nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", EnvExecSupervisor, err)
	}
	return actors.WithExecChannel(b)
}

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
