package dockertest

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/images"
)

// pythonBuildTimeout bounds bootstrapping the Python or the sshd image, which download Debian
// packages.
const pythonBuildTimeout = 15 * time.Minute

// Python calls [Require], builds the Python workload image ([images.EnsurePython]) when the
// engine lacks a current one, and returns its tag, [images.PythonTag]. It calls t.Fatal when
// the image cannot be built.
func Python(t testing.TB) string {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), pythonBuildTimeout)
	defer cancel()
	if err := images.EnsurePython(ctx, dockerCLI, images.PythonTag); err != nil {
		t.Fatalf("build the python image: %v", err)
	}
	return images.PythonTag
}
