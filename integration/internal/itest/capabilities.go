package itest

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// NoCapabilities fails t unless a command run in sb, and the sandbox's first process (the
// exec channel's supervisor, the released gate's image command, or sleep), hold no capability
// in any set: inheritable, permitted, effective, bounding and ambient all zero, as the kernel
// reports them in /proc/PID/status.
func NoCapabilities(t testing.TB, sb sandbox.Sandbox) {
	t.Helper()
	res, err := sb.Exec(Context(t), sandbox.Shell("for p in self 1; do echo pid=$p; grep '^Cap' /proc/$p/status; done"), "/", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read the capabilities: %v %d %s", err, res.ExitCode, res.StderrBytes)
	}
	out := string(res.StdoutBytes)
	sets := 0
	for _, line := range strings.Split(out, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "Cap") {
			continue
		}
		sets++
		if v := strings.TrimSpace(value); strings.Trim(v, "0") != "" {
			t.Errorf("%s is %s, want no capability:\n%s", name, v, out)
		}
	}
	if sets < 8 { // CapInh, CapPrm, CapEff and CapBnd of each process at least
		t.Fatalf("read %d capability sets, want those of both processes:\n%s", sets, out)
	}
}
