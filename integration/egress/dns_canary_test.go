package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// The canary's bridge (ordinary, so the positive control reaches it) and the reference's
// isolated internal network: private subnets of the tests' own, never routed anywhere.
const (
	canarySubnet    = "10.216.0.0/24"
	referenceSubnet = "10.217.0.0/24"
)

// TestEgressDNSCanary is the engine property of egress-and-reap.md §5.3 (2): does the
// daemon's embedded resolver forward a query from a container on an isolated internal
// network to an outside server? The project's canary DNS server, on a bridge of its own,
// logs every query. A reference container on an --internal network built with the flags this
// daemon's allowlist topology uses (inhibit_ipv4 below 28, the isolated gateway modes from
// 28), with the workload's constraints, names the canary as its upstream and looks up a
// unique name; the canary must log nothing, on every daemon that serves allowlists. The
// positive control, the same lookup from a container on the canary's ordinary bridge, must
// be logged, or the probe would prove nothing.
func TestEgressDNSCanary(t *testing.T) {
	// It asks the daemon's resolver, through the docker CLI, never the engine's drivers.
	dockertest.Require(t)
	ctx := itest.Context(t)
	for _, err := range []error{images.EnsureTarget(ctx, "docker"), images.EnsureClient(ctx, "docker", dockertest.Busybox(t))} {
		if err != nil {
			t.Fatalf("build images: %v", err)
		}
	}
	suffix := randomHex(t)
	canaryNet := "maf-e2e-canary-" + suffix
	newTestNetwork(t, canaryNet, "--subnet", canarySubnet)
	canary := dockertest.RunContainerCmd(t, images.TargetTag, []string{"dns"}, "--entrypoint", "/maf-e2e",
		"--network", canaryNet, "--dns", "127.0.0.1", "--user", "0")
	canaryIP := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format",
		`{{(index .NetworkSettings.Networks "`+canaryNet+`").IPAddress}}`, canary))
	waitLogged(t, canary, "canary listening")

	version, err := dockertest.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	topology, err := docker.TopologyFor(version)
	if err != nil {
		t.Fatal(err)
	}
	refNet := "maf-e2e-isolated-" + suffix
	flags := []string{"--internal", "--subnet", referenceSubnet}
	if topology == docker.TopologyInhibitIPv4 {
		flags = append(flags, "--opt", docker.OptInhibitIPv4+"=true")
	} else {
		flags = append(flags, "--opt", docker.OptGatewayModeIPv4+"="+docker.GatewayIsolated, "--opt", docker.OptGatewayModeIPv6+"="+docker.GatewayIsolated)
	}
	newTestNetwork(t, refNet, flags...)
	reference := dockertest.RunContainer(t, images.ClientTag, "--network", refNet, "--dns", canaryIP,
		"--cap-drop", "NET_RAW", "--sysctl", "net.ipv6.conf.all.disable_ipv6=1")
	control := dockertest.RunContainer(t, images.ClientTag, "--network", canaryNet, "--dns", canaryIP)

	refName := "canary-ref-" + suffix + ".maf-e2e.example"
	ctlName := "canary-ctl-" + suffix + ".maf-e2e.example"
	if out, _, err := dockertest.DockerErr(ctx, "exec", reference, "maf-e2e", "resolve", refName); err == nil {
		t.Errorf("the reference container resolved %s: %s", refName, out)
	}
	// The control's query is logged before it is answered, so once the control has its
	// answer the log holds it; the reference's query, if forwarded, went out before that. A
	// forward can be lost on a loaded host, so the control asks up to three times.
	var logs string
	for try := 1; ; try++ {
		if out, _, err := dockertest.DockerErr(ctx, "exec", control, "maf-e2e", "resolve", ctlName); err == nil {
			t.Fatalf("the control resolved %s through an NXDOMAIN canary: %s", ctlName, out)
		}
		out, _, _ := dockertest.DockerErr(ctx, "logs", canary)
		if logs = string(out); strings.Contains(logs, "query "+ctlName+".") {
			break
		}
		if try == 3 {
			t.Fatalf("positive control: the canary never saw %s, so the probe proves nothing:\n%s", ctlName, logs)
		}
	}
	if strings.Contains(logs, refName) {
		t.Fatalf("daemon %s (%s): the embedded resolver FORWARDED the isolated container's query to the canary:\n%s", version, topology, logs)
	}
	t.Logf("daemon %s (%s): the canary saw no query from the isolated internal network", version, topology)
}

func randomHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// newTestNetwork creates a labelled network, removed when the test ends, and returns its ID.
func newTestNetwork(t testing.TB, name string, flags ...string) string {
	t.Helper()
	args := append(append([]string{"network", "create"}, dockertest.LabelArgs()...), flags...)
	dockertest.CleanupNetwork(t, name)
	return strings.TrimSpace(dockertest.Docker(t, append(args, name)...))
}

// waitLogged polls a container's log until it holds want (at most 10 s) and returns it.
func waitLogged(t testing.TB, id, want string) string {
	t.Helper()
	var logs string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, errOut, err := dockertest.DockerErr(context.Background(), "logs", id)
		logs = string(out) + string(errOut)
		if err == nil && strings.Contains(logs, want) {
			return logs
		}
	}
	t.Fatalf("container %s never logged %q:\n%s", id, want, logs)
	return ""
}
