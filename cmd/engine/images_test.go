package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// An installed engine builds every image it needs with no source tree and no Go toolchain:
// the binary "make engine" builds, run from a directory outside the module with a PATH that
// holds no go, builds the busybox, the proxy and the observer image (under tags of this test's
// own). The proxy and the observer it embeds are the ones this source builds, and they run.
func TestImagesBuildInstalled(t *testing.T) {
	dockertest.Require(t)
	dockerPath, err := exec.LookPath("docker")
	if err != nil {
		t.Fatalf("the docker CLI is not on PATH: %v", err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not on PATH: %v", err)
	}
	busyboxTag := "maf-sandbox-test/busybox:installed-" + dockertest.Process()
	proxyTag := "maf-sandbox/egress-proxy:installed-" + dockertest.Process()
	observerTag := "maf-sandbox/fingerprint-observer:installed-" + dockertest.Process()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, stderr, err := dockertest.DockerErr(ctx, "image", "rm", "--force", busyboxTag, proxyTag, observerTag); err != nil {
			t.Errorf("remove the test images: %v: %s", err, stderr)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "engine")
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "make", "-C", root, "--no-print-directory", "engine", "ENGINE_BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make engine: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("make engine took %v; the binary is %.1f MiB", time.Since(start).Round(time.Second), float64(fi.Size())/(1<<20))

	// No go on PATH, and a working directory outside any module.
	noGo := t.TempDir()
	if _, err := exec.LookPath(filepath.Join(noGo, "go")); err == nil {
		t.Fatal("the empty PATH directory has a go")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+noGo)
	cmd := exec.CommandContext(ctx, bin, "images", "build", "--force", "--docker", dockerPath,
		"--busybox-tag", busyboxTag, "--proxy-tag", proxyTag, "--observer-tag", observerTag)
	cmd.Dir, cmd.Env = t.TempDir(), env
	start = time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("engine images build outside the module with no go: %v\n%s", err, out)
	}
	t.Logf("engine images build --force took %v", time.Since(start).Round(time.Second))

	got := dockertest.Docker(t, "image", "inspect", "--format", `{{index .Config.Labels "`+images.LabelTestImage+`"}}`, busyboxTag)
	if got != "busybox" {
		t.Fatalf("busybox image label %q, want busybox", got)
	}
	got = dockertest.Docker(t, "image", "inspect", "--format",
		`{{index .Config.Labels "`+images.LabelImage+`"}}|{{json .Config.Entrypoint}}|{{.Config.User}}`, proxyTag)
	if want := `proxy|["/maf-egress-proxy","proxy"]|65532:65532`; got != want {
		t.Fatalf("proxy image config %s, want %s", got, want)
	}

	// The embedded binary is the one this source builds: EnsureProxy, which builds from
	// source here, finds the image current and leaves it alone.
	built := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", proxyTag)
	if err := images.EnsureProxy(ctx, "docker", proxyTag); err != nil {
		t.Fatalf("EnsureProxy: %v", err)
	}
	if now := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", proxyTag); now != built {
		t.Fatalf("the embedded proxy differs from the source's: EnsureProxy rebuilt %s as %s", built, now)
	}

	// Likewise the observer, which is FROM scratch: one layer, no volume.
	got = dockertest.Docker(t, "image", "inspect", "--format",
		`{{index .Config.Labels "`+images.LabelImage+`"}}|{{json .Config.Entrypoint}}|{{.Config.User}}|{{json .Config.Volumes}}|{{len .RootFS.Layers}}`, observerTag)
	if want := `observer|["/maf-fingerprint-observer","measure"]|0:0|null|1`; got != want {
		t.Fatalf("observer image config %s, want %s", got, want)
	}
	built = dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", observerTag)
	if err := images.EnsureObserver(ctx, "docker", observerTag); err != nil {
		t.Fatalf("EnsureObserver: %v", err)
	}
	if now := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", observerTag); now != built {
		t.Fatalf("the embedded observer differs from the source's: EnsureObserver rebuilt %s as %s", built, now)
	}

	// The proxy runs: with an argument it does not take it prints its usage and exits 2.
	args := append([]string{"run", "--rm", "--network", "none"}, dockertest.LabelArgs()...)
	stdout, stderr, err := dockertest.DockerErr(ctx, append(args, proxyTag, "bogus")...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(stderr), "usage: maf-egress-proxy") {
		t.Fatalf("proxy container: %v, stdout %q, stderr %q; want exit 2 and its usage", err, stdout, stderr)
	}
	// The observer runs: with an argument it does not take it says so and exits 2.
	stdout, stderr, err = dockertest.DockerErr(ctx, append(args, observerTag, "bogus")...)
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(stderr), "unexpected arguments") {
		t.Fatalf("observer container: %v, stdout %q, stderr %q; want exit 2 and its refusal", err, stdout, stderr)
	}
}
