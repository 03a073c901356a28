package fingerprint

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/fingerprint"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// observerImage is the observer image the fingerprint tests run: MAF_SANDBOX_DOCKER_OBSERVER_IMAGE
// when set (the reference's variable), otherwise the one this source builds, made current.
func observerImage(t testing.TB) string {
	t.Helper()
	if ref := os.Getenv("MAF_SANDBOX_DOCKER_OBSERVER_IMAGE"); ref != "" {
		return ref
	}
	dockertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := images.EnsureObserver(ctx, "docker", images.ObserverTag); err != nil {
		t.Fatalf("build the observer image: %v", err)
	}
	return images.ObserverTag
}

// fingerprintWorkload is the workload image: MAF_SANDBOX_DOCKER_E2E_IMAGE when set, otherwise
// the busybox test image.
func fingerprintWorkload(t testing.TB) string {
	t.Helper()
	if ref := os.Getenv("MAF_SANDBOX_DOCKER_E2E_IMAGE"); ref != "" {
		return ref
	}
	return dockertest.Busybox(t)
}

// fingerprintEngine is an engine whose every object carries the test labels, for the subject.
func fingerprintEngine(t testing.TB) fingerprint.Engine {
	t.Helper()
	e, err := docker.NewEngine(docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	return e
}

// noObserverOutlives registers, before anything else the test cleans up (so it runs last), a
// check that no observer container of this run is left, running or not.
func noObserverOutlives(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		args := []string{"ps", "-a", "--format", "{{.Names}}", "--filter", "label=" + label.Role + "=" + label.RoleObserver}
		for k, v := range dockertest.Labels() {
			args = append(args, "--filter", "label="+k+"="+v)
		}
		if left := strings.TrimSpace(dockertest.Docker(t, args...)); left != "" {
			t.Errorf("observer containers outlived the test: %s", left)
			for _, name := range strings.Fields(left) {
				_, _, _ = dockertest.DockerErr(context.Background(), "rm", "-f", name)
			}
		}
	})
}

// fingerprintWorkDir is the storage base of most fingerprint tests: a directory the image
// already has, so that acquiring the sandbox changes nothing in the root filesystem, and
// whose owner is the guest (root), who holds no capability to write another user's
// directory. The default base, which the acquire creates, has tests of its own
// (fingerprint_base_test.go).
const fingerprintWorkDir = "/root"

// freshSandbox acquires a sandbox of its own on the workload image, with a subject over it.
func freshSandbox(t *testing.T, b *actors.Backend, opts ...fingerprint.Option) (*actors.Sandbox, *fingerprint.Subject) {
	t.Helper()
	return freshSandboxOn(t, b, fingerprintWorkDir, opts...)
}

// freshSandboxOn is freshSandbox on the storage base workDir; "" is the backend's default.
func freshSandboxOn(t *testing.T, b *actors.Backend, workDir string, opts ...fingerprint.Option) (*actors.Sandbox, *fingerprint.Subject) {
	t.Helper()
	specOpts := []sandbox.SpecOption{sandbox.WithImage(fingerprintWorkload(t))}
	if workDir != "" {
		specOpts = append(specOpts, sandbox.WithWorkDir(workDir))
	}
	spec, err := sandbox.NewSpec("shell", specOpts...)
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	sb := itest.Acquire(t, b, itest.NewKey(t), spec).(*actors.Sandbox)
	opts = append([]fingerprint.Option{fingerprint.WithObserverImage(observerImage(t))}, opts...)
	s, err := fingerprint.New(itest.Context(t), fingerprintEngine(t), sb, opts...)
	if err != nil {
		t.Fatalf("new subject: %v", err)
	}
	return sb, s
}

// guestSh runs script in the guest and fails the test unless it exits 0.
func guestSh(t *testing.T, ctx context.Context, sb sandbox.Sandbox, script string) {
	t.Helper()
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", script), "/", time.Minute)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q exited %d: %s", script, res.ExitCode, res.StderrText())
	}
}

var _ sandbox.FingerprintSubject = (*fingerprint.Subject)(nil)
