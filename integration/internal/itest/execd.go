package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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

// SuiteExecChannel reports whether [EnvExecSupervisor] gives the suite's backends the
// channel, for a test that counts the driver's calls (the supervisor is copied in at create).
func SuiteExecChannel() bool { return os.Getenv(EnvExecSupervisor) != "" }

// supervisorBuild is the test binary's one build of the supervisor: every test of a package
// gets the same bytes, built once.
var supervisorBuild struct {
	once sync.Once
	bin  []byte
	err  error
}

// ExecSupervisor builds the exec channel's supervisor (cmd/execd) as the engine ships it, a
// static binary, and returns it, for actors.WithExecChannel. The first call of a test binary
// builds it; later calls return the same bytes.
func ExecSupervisor(t testing.TB) []byte {
	t.Helper()
	supervisorBuild.once.Do(func() { supervisorBuild.bin, supervisorBuild.err = buildSupervisor() })
	if supervisorBuild.err != nil {
		t.Fatal(supervisorBuild.err)
	}
	return supervisorBuild.bin
}

func buildSupervisor() ([]byte, error) {
	dir, err := os.MkdirTemp("", "maf-sandbox-execd-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "maf-sandbox-execd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/mafsandbox/engine/cmd/execd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build cmd/execd: %w\n%s", err, out)
	}
	return os.ReadFile(bin)
}
