package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// execdBinary is the exec channel's supervisor in the embedded directory and its main package
// (docs/architecture.md, "The exec channel").
const (
	execdBinary = "maf-sandbox-execd"
	execdMain   = "./cmd/execd"
)

// ExecSupervisor returns the exec channel's supervisor (cmd/execd) for the daemon's platform,
// for actors.WithExecChannel: the binary `make engine` embedded in this program, else one
// built with CGO_ENABLED=0 from the engine's source, wherever this program was built from it
// (sourceRoot), which needs the Go toolchain. It is copied into sandboxes, never run on the
// host.
func ExecSupervisor(ctx context.Context, dockerPath string) ([]byte, error) {
	goos, goarch, err := daemonPlatform(ctx, dockerPath)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "maf-sandbox-execd-")
	if err != nil {
		return nil, fmt.Errorf("exec supervisor: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, execdBinary)
	im := staticImage{what: "exec supervisor", binary: execdBinary, main: execdMain, embedded: true}
	if err := im.write(ctx, goos, goarch, out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}
