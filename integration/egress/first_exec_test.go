package egress

import (
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// A cold acquire hands out its storage base on every file plane and egress mode: the very
// first call, an exec in ".", runs there. An allowlisted (gated) workload on the host plane
// was once handed out before its base existed, and the first exec answered runc's chdir
// failure as exit 126.
func TestFirstExecRunsInTheBase(t *testing.T) {
	image := dockertest.Busybox(t) // it has no /maf-sandbox/work: every acquire makes the base
	egress := []struct {
		name string
		spec func(t *testing.T) sandbox.Spec
	}{
		{"closed", func(t *testing.T) sandbox.Spec { return itest.BusyboxSpec(t) }},
		{"allowlist", func(t *testing.T) sandbox.Spec { return allowlistSpec(t, image, "first-exec.maf-e2e.example") }},
	}
	for _, p := range itest.FilePlanes(t) {
		for _, e := range egress {
			t.Run(string(p)+"_"+e.name, func(t *testing.T) {
				b := egressBackend(t, "", actors.WithFilePlane(p))
				sb := itest.Acquire(t, b, itest.NewKey(t), e.spec(t))
				res, err := sb.Exec(itest.Context(t), sandbox.Argv("echo", "ok"), ".", time.Minute)
				if err != nil {
					t.Fatalf("first exec: %v", err)
				}
				if res.ExitCode != 0 || res.Stdout() != "ok\n" {
					t.Fatalf("first exec = %d %q %q, want 0 \"ok\\n\"", res.ExitCode, res.Stdout(), res.Stderr())
				}
				res, err = sb.Exec(itest.Context(t), sandbox.Argv("pwd"), ".", time.Minute)
				if err != nil || res.Stdout() != actors.DefaultWorkDir+"\n" {
					t.Fatalf("pwd = %q, %v", res.Stdout(), err)
				}
			})
		}
	}
}
