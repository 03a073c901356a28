package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// gateTestImage builds a test image FROM the e2e client image with the given extra recipe
// lines, removed at cleanup.
func gateTestImage(t *testing.T, lines ...string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := "maf-sandbox-test/gate-" + hex.EncodeToString(b) + ":local"
	recipe := "FROM " + images.ClientTag + "\nLABEL " + images.LabelTestImage + "=gate\n" + strings.Join(lines, "\n") + "\n"
	args := append([]string{"build", "-q", "-t", tag}, dockertest.LabelArgs()...)
	cmd := exec.CommandContext(itest.Context(t), "docker", append(args, "-")...)
	cmd.Stdin = strings.NewReader(recipe)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { _, _, _ = dockertest.DockerErr(context.Background(), "rmi", "-f", tag) })
	return tag
}

// pid1 describes a sandbox's first process as the guest sees it: its argv, sorted
// environment (HOSTNAME and, for an allowlisted one, the proxy variables left out), working
// directory, executable, identity and signal dispositions.
func pid1(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	script := `tr '\0' ' ' < /proc/1/cmdline; echo
tr '\0' '\n' < /proc/1/environ | grep -v -e '^HOSTNAME=' -e '^HTTPS_PROXY=' -e '^HTTP_PROXY=' -e '^https_proxy=' -e '^http_proxy=' | sort
readlink /proc/1/cwd; readlink /proc/1/exe
grep -E '^(Uid|Gid|Groups|SigBlk|SigIgn|SigCgt|NoNewPrivs):' /proc/1/status`
	res, err := sb.Exec(itest.Context(t), sandbox.Shell(script), "/", time.Minute)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read pid 1: %v %d %s", err, res.ExitCode, res.StderrBytes)
	}
	return string(res.StdoutBytes)
}

// An allowlisted workload's first process is the gate, and once released it is the image's
// own: the same argv (entrypoint and command), environment, working directory, executable,
// user and signal dispositions as a closed sandbox of the same image, which has no gate — for
// an image without an entrypoint and for one whose entrypoint is a shell that execs its
// arguments.
func TestEgressGateRunsTheImagesOwnCommand(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network)
	for _, tc := range []struct {
		name   string
		recipe []string
	}{
		{"no entrypoint", []string{"WORKDIR /srv/gate", `ENV GATE_TEST="a b" PATH=/usr/local/bin:/usr/bin:/bin`, "USER 1234:1234"}},
		{"shell entrypoint", []string{"WORKDIR /srv", `ENTRYPOINT ["/bin/sh", "-c", "exec \"$@\"", "entry"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			image := gateTestImage(t, tc.recipe...)
			allowKey, closedKey := itest.NewKey(t), itest.NewKey(t)
			allowSpec := allowlistSpec(t, image, allowedHost)
			gated := itest.Acquire(t, b, allowKey, allowSpec)
			closedSpec, err := sandbox.NewSpec("shell", sandbox.WithImage(image))
			if err != nil {
				t.Fatal(err)
			}
			closed := itest.Acquire(t, b, closedKey, closedSpec)
			name := docker.ContainerName(allowKey, allowSpec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
			if path := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Path}}", name)); path != images.GateBinary {
				t.Fatalf("the allowlisted workload's entrypoint is %q, not the gate %s", path, images.GateBinary)
			}
			got, want := pid1(t, gated), pid1(t, closed)
			if got != want {
				t.Fatalf("the gated workload's pid 1 differs from the ungated one's:\ngated:\n%s\nclosed:\n%s", got, want)
			}
			if !strings.HasPrefix(got, "sleep infinity \n") {
				t.Fatalf("pid 1 runs %q, want the engine's sleep infinity", strings.SplitN(got, "\n", 2)[0])
			}
			t.Logf("pid 1 of both:\n%s", got)
		})
	}
}

// A stopped gated workload started again goes straight on to the image's command even when
// the proxy that released it is gone: its network was proved when it was created, and the
// engine writes the gate's release file before the restart. The replacement proxy is built
// without a proof (the actor proved that network) and so holds no release token: only the
// file can release the gate.
func TestEgressGateReleasesARestartedWorkload(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network)
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	itest.Acquire(t, b, key, spec)
	name := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	dockertest.Docker(t, "kill", name, docker.ProxyName(name))
	sb := itest.Acquire(t, b, key, spec)
	if got := pid1(t, sb); !strings.HasPrefix(got, "sleep infinity \n") {
		t.Fatalf("pid 1 of the restarted workload runs %q, want the engine's sleep infinity (the gate was not released)", strings.SplitN(got, "\n", 2)[0])
	}
	if path := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", "{{.Path}}", name)); path != images.GateBinary {
		t.Fatalf("the workload was replaced, not restarted: its entrypoint is %q", path)
	}
	res, err := sb.Exec(itest.Context(t), sandbox.Argv("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64), "/", time.Minute)
	if err != nil || strings.TrimSpace(string(res.StdoutBytes)) != "code=200" {
		t.Fatalf("the restarted sandbox does not reach the allowed host through its new proxy: %v %s", err, res.StdoutBytes)
	}
}

// An image whose command cannot be found: without a gate its start fails; with the gate the
// gate stops at once, before any wait, and the acquire is refused with nothing left behind.
func TestEgressGateRefusesAnAbsentCommand(t *testing.T) {
	fx := newEgressFixture(t)
	b := egressBackend(t, fx.network)
	image := gateTestImage(t, `ENTRYPOINT ["/no/such/entrypoint"]`)
	key := itest.NewKey(t)
	spec := allowlistSpec(t, image, allowedHost)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := b.Acquire(ctx, key, spec)
	if err == nil {
		b.Dispose(ctx, key, sandbox.DisposeOptions{})
		t.Fatal("an allowlisted sandbox whose entrypoint is absent was handed out")
	}
	t.Logf("refused: %v", err)
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	if err := b.AwaitTeardowns(ctx); err != nil {
		t.Fatal(err)
	}
	name := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	if left := leftovers(t, name); left != "" {
		t.Fatalf("left behind: %s", left)
	}
}

// The gate binary is a static program of the standard library alone, small enough to be
// copied into every allowlisted workload.
func TestEgressGateBinaryIsSmallAndStatic(t *testing.T) {
	out, err := exec.CommandContext(itest.Context(t), "go", "list", "-deps", "github.com/mafsandbox/engine/cmd/gate").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if i := slices.IndexFunc(deps, func(d string) bool {
		return strings.Contains(d, ".") && !strings.HasPrefix(d, "github.com/mafsandbox/engine/cmd/gate")
	}); i >= 0 {
		t.Fatalf("the gate links %s: it must use the standard library only", deps[i])
	}
}
