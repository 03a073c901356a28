package itest

import (
	"context"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// DerivedImage commits a variant of the busybox image: setup runs in a container first, and
// change is a Dockerfile instruction applied by the commit. The image is removed afterwards.
func DerivedImage(t *testing.T, setup, change string) string {
	t.Helper()
	base := dockertest.Busybox(t)
	tag := "maf-sandbox-test/derived:" + strings.ToLower(NewKey(t).Scope)
	id := dockertest.RunContainer(t, base)
	dockertest.Docker(t, "exec", id, "sh", "-c", setup)
	args := []string{"commit", "--change", "LABEL maf-sandbox.test-image=derived"}
	if change != "" {
		args = append(args, "--change", change)
	}
	dockertest.Docker(t, append(args, id, tag)...)
	t.Cleanup(func() { dockertest.DockerErr(context.Background(), "rmi", "-f", tag) })
	return tag
}
