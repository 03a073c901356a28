package sandbox_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the uid and gid of the unprivileged account a root test drops to.
const nobody = 65534

// envNobodyChild marks the child runAsNobody starts, so a child that kept root's
// credentials fails instead of starting another.
const envNobodyChild = "MAF_SANDBOX_TEST_NOBODY_CHILD"

// runAsNobody runs the calling test alone, again, in a child of this test binary whose
// credentials are nobody's, and fails t if the child's test did not pass. The binary is
// copied to a directory nobody can read, since go test builds it in a directory only root
// can enter; the child works in that directory and in temporary directories of its own
// (TMPDIR must be one nobody can write, as /tmp is).
func runAsNobody(t *testing.T) {
	t.Helper()
	if os.Getenv(envNobodyChild) != "" {
		t.Fatalf("%s: the child still runs as uid %d", t.Name(), os.Geteuid())
	}
	dir, err := os.MkdirTemp("", "maf-sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	copyExecutable(t, bin)
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envNobodyChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s as uid %d: %v\n%s", t.Name(), nobody, err, out)
	}
	// A child that skipped or matched nothing exits 0 too.
	if !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("%s as uid %d did not pass:\n%s", t.Name(), nobody, out)
	}
}

// copyExecutable copies the running test binary to dst, executable by anyone.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
