package dockertest

import (
	"context"
	"testing"

	"github.com/mafsandbox/engine/internal/images"
)

// SSHD calls [Require], builds the sshd image that plays a remote Docker host
// ([images.EnsureSSHD]) when the engine lacks a current one, and returns its tag,
// [images.SSHDTag]. It calls t.Fatal when the image cannot be built.
func SSHD(t testing.TB) string {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), pythonBuildTimeout)
	defer cancel()
	if err := images.EnsureSSHD(ctx, dockerCLI, images.SSHDTag); err != nil {
		t.Fatalf("build the sshd image: %v", err)
	}
	return images.SSHDTag
}
