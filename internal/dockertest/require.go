package dockertest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/images"
)

// EnvRequireDocker is the environment variable that, set to "1", turns a Docker daemon that
// does not answer from a skip into a failure. CI sets it.
const EnvRequireDocker = "MAF_SANDBOX_REQUIRE_DOCKER"

// probeTimeout bounds the round trip that tells whether the daemon answers.
const probeTimeout = 10 * time.Second

// buildTimeout bounds building the test image.
const buildTimeout = 5 * time.Minute

// Require returns when the Docker daemon answers a request for its version. Otherwise it
// calls t.Fatal when [EnvRequireDocker] is "1" and t.Skip when it is not, giving the reason.
func Require(t testing.TB) {
	t.Helper()
	if _, err := ServerVersion(); err != nil {
		if required() {
			t.Fatalf("docker daemon does not answer and %s=1: %v", EnvRequireDocker, err)
		}
		t.Skipf("docker daemon does not answer (%s=1 makes this a failure): %v", EnvRequireDocker, err)
	}
}

// RequireRoot returns when the test runs as root, which the host file plane's credential
// changes need (CI runs as root). Otherwise it fails when [EnvRequireDocker] is "1", as a
// missing daemon does, and skips when it is not.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if required() {
		t.Fatalf("this test needs root and %s=1: running as uid %d", EnvRequireDocker, os.Geteuid())
	}
	t.Skipf("needs root to change file credentials (%s=1 makes this a failure)", EnvRequireDocker)
}

// Busybox calls [Require], builds the busybox workload image when the engine lacks it, and
// returns its tag, [images.BusyboxTag]. It calls t.Fatal when the image cannot be built.
func Busybox(t testing.TB) string {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if err := images.EnsureBusybox(ctx, dockerCLI, images.BusyboxTag); err != nil {
		t.Fatalf("build test image: %v", err)
	}
	return images.BusyboxTag
}

// ServerVersion asks the daemon, not the client, for its version, within 10 s. It fails when
// the daemon does not answer.
func ServerVersion() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, _, err := DockerErr(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", errors.New("docker version: no server version")
	}
	return v, nil
}

func required() bool { return os.Getenv(EnvRequireDocker) == "1" }
