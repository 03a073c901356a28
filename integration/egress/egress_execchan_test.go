package egress

import (
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// TestEgressGateReleasesTheExecChannel: an allowlisted sandbox of an image without an
// entrypoint, on a backend with the exec channel, has the gate release the supervisor in
// place of sleep; its commands then run through the channel (their parent is the
// supervisor, PID 1 — docker exec's have none in the container) with the environment docker
// exec gives, the proxy variables included.
func TestEgressGateReleasesTheExecChannel(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network, actors.WithExecChannel(itest.ExecSupervisor(t)))
	image := gateTestImage(t, "WORKDIR /srv/gate")
	sb := itest.Acquire(t, b, itest.NewKey(t), allowlistSpec(t, image, allowedHost)).(*actors.Sandbox)
	res, err := sb.Exec(itest.Context(t), sandbox.Shell("tr '\\0' ' ' < /proc/1/cmdline; echo; grep PPid /proc/$$/status; env | sort"), "/", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %d %s", err, res.ExitCode, res.StderrBytes)
	}
	lines := strings.SplitN(string(res.StdoutBytes), "\n", 3)
	if len(lines) < 3 || !strings.HasPrefix(lines[0], execwire.Binary+" ") {
		t.Fatalf("PID 1 is not the supervisor: %q", res.StdoutBytes)
	}
	if strings.Join(strings.Fields(lines[1]), " ") != "PPid: 1" {
		t.Fatalf("the command did not run through the channel: %q", lines[1])
	}
	want := dockertest.Docker(t, "exec", "-w", "/", sb.ContainerName(), "sh", "-c", "env | sort")
	if strings.TrimSpace(lines[2]) != strings.TrimSpace(want) {
		t.Fatalf("environment differs\nchannel:\n%s\ndocker exec:\n%s", lines[2], want)
	}
	if !strings.Contains(lines[2], "HTTPS_PROXY=") {
		t.Fatalf("no proxy variables: %s", lines[2])
	}
}
