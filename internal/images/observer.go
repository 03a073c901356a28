package images

import (
	"context"
	"fmt"
	"os"
)

// ObserverTag is the tag the fingerprint observer image is built under by default.
const ObserverTag = "maf-sandbox/fingerprint-observer:local"

// observerBinary is the observer's path in the image.
const observerBinary = "maf-fingerprint-observer"

// observerMain is the package of the observer's main, relative to the module root.
const observerMain = "./cmd/observer"

// observerDockerfile is the whole recipe (docker-backend §12.5): the static binary alone, FROM
// scratch (no pull, no interpreter, nothing of the workload's). It runs as root because it
// reads the workload's processes and files through /proc/<pid>/root; the engine runs it with
// every capability dropped but SYS_PTRACE, which that read needs. It declares no volume.
const observerDockerfile = `FROM scratch
COPY ` + observerBinary + ` /` + observerBinary + `
USER 0:0
LABEL ` + LabelImage + `=observer
LABEL ` + LabelBinarySHA256 + `=%s
ENTRYPOINT ["/` + observerBinary + `", "measure"]
`

// EnsureObserver builds the observer image under tag unless the daemon already has one built
// around the same binary, as [EnsureProxy] does for the proxy. It fails as [BuildObserver].
func EnsureObserver(ctx context.Context, dockerPath, tag string) error {
	dir, sum, err := binaryContext(ctx, dockerPath, observerBinary, observerDockerfile, writeObserver)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	have, err := imageLabel(ctx, dockerPath, tag, LabelBinarySHA256)
	if err != nil {
		return err
	}
	if have == sum {
		return nil
	}
	return dockerBuild(ctx, dockerPath, tag, dir)
}

// BuildObserver builds the fingerprint observer image and tags it tag, replacing any image of
// that name. The observer binary, for the daemon's platform, is the one embedded in this
// program when `make engine` built it, otherwise `CGO_ENABLED=0 go build` of ./cmd/observer
// of the module holding the working directory, exactly as [BuildProxy] finds the proxy. The
// image has the entrypoint ["/maf-fingerprint-observer", "measure"], runs as 0:0 and carries
// [LabelImage]=observer and [LabelBinarySHA256].
//
// It fails when the daemon cannot tell its platform; when no binary for it is embedded and
// the source cannot be built; and when docker build fails.
func BuildObserver(ctx context.Context, dockerPath, tag string) error {
	dir, _, err := binaryContext(ctx, dockerPath, observerBinary, observerDockerfile, writeObserver)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	return dockerBuild(ctx, dockerPath, tag, dir)
}

// writeObserver writes the observer binary for goos/goarch to out: the embedded one, or one
// built from the module's source.
func writeObserver(ctx context.Context, goos, goarch, out string) error {
	b, ok, err := embeddedBinary(observerBinary, goos, goarch)
	if err != nil {
		return fmt.Errorf("read the embedded observer binary: %w", err)
	}
	if ok {
		if err := os.WriteFile(out, b, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", observerBinary, err)
		}
		return nil
	}
	if err := goBuild(ctx, observerMain, goos, goarch, out); err != nil {
		return fmt.Errorf("this binary embeds no observer binary for %s/%s (make engine builds one that does), "+
			"and building it from source failed: %w", goos, goarch, err)
	}
	return nil
}
