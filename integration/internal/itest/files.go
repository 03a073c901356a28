package itest

import (
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// FilesSpec requires everything the file surface offers.
func FilesSpec(t testing.TB) sandbox.Spec {
	return BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
}

// Sh runs a shell line in the sandbox and fails the test unless it exits 0.
func Sh(t testing.TB, sb sandbox.Sandbox, line string) string {
	t.Helper()
	res, err := sb.Exec(Context(t), sandbox.Shell(line), "/", 30*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("sh %q: %v exit %d stderr %q", line, err, res.ExitCode, res.Stderr())
	}
	return res.Stdout()
}
