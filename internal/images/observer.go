package images

import (
	"context"
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
	return observerImage().ensure(ctx, dockerPath, tag)
}

// BuildObserver builds the fingerprint observer image and tags it tag, replacing any image of
// that name. The observer binary, for the daemon's platform, is the one embedded in this
// program when `make engine` built it, otherwise `CGO_ENABLED=0 go build` of ./cmd/observer
// of the engine's source, found exactly as [BuildProxy] finds the proxy's. The
// image has the entrypoint ["/maf-fingerprint-observer", "measure"], runs as 0:0 and carries
// [LabelImage]=observer and [LabelBinarySHA256].
//
// It fails when the daemon cannot tell its platform; when no binary for it is embedded and
// the source cannot be built; and when docker build fails.
func BuildObserver(ctx context.Context, dockerPath, tag string) error {
	return observerImage().build(ctx, dockerPath, tag)
}

// observerImage is the observer image's recipe and binary.
func observerImage() staticImage {
	return staticImage{what: "observer", binary: observerBinary, main: observerMain, recipe: observerDockerfile, embedded: true}
}
