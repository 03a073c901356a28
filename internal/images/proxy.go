package images

import (
	"context"
)

// ProxyTag is the tag the egress proxy image is built under by default.
const ProxyTag = "maf-sandbox/egress-proxy:local"

// LabelImage marks the engine's own product images (not test images); its value names the
// image ("proxy").
const LabelImage = "maf-sandbox.image"

// LabelBinarySHA256 records the SHA-256 of the static binary an image was built around, so
// that [EnsureProxy] can tell an image built from this source from a stale one.
const LabelBinarySHA256 = "maf-sandbox.image.binary-sha256"

// proxyBinary is the binary's path in the image; the entrypoint runs it with the engine
// binary's subcommand spelling, "proxy".
const proxyBinary = "maf-egress-proxy"

// GateBinary is the workload gate's path in the proxy image, where the engine reads it, and
// in every allowlisted workload it is copied into (docs/architecture.md, "The workload gate").
const GateBinary = "/maf-sandbox-gate"

// gateBinaryName is the gate's file name in the build context and the embedded directory.
const gateBinaryName = "maf-sandbox-gate"

// gateMain is the gate's main package, relative to the module root.
const gateMain = "./cmd/gate"

// proxyMain is the package of the proxy's main, relative to the module root.
const proxyMain = "./cmd/proxy"

// proxyDockerfile is the whole recipe (egress-and-reap.md §2.7): the static binary, run as an
// unprivileged numeric user, and beside it the workload gate the engine reads out of the image
// ([GateBinary]); one COPY, one layer. FROM scratch needs no pull.
const proxyDockerfile = `FROM scratch
COPY ` + proxyBinary + ` ` + gateBinaryName + ` /
USER 65532:65532
EXPOSE 3128
LABEL ` + LabelImage + `=proxy
LABEL ` + LabelBinarySHA256 + `=%s
ENTRYPOINT ["/` + proxyBinary + `", "proxy"]
`

// EnsureProxy builds the image under tag around the proxy binary ([BuildProxy] says which)
// unless the daemon already has an image of that tag built around the same binary
// ([LabelBinarySHA256]). A build from source is cheap with Go's build cache, so a stale image
// is never mistaken for a current one. It fails as [BuildProxy] does, and when the daemon
// cannot be asked.
func EnsureProxy(ctx context.Context, dockerPath, tag string) error {
	return proxyImage().ensure(ctx, dockerPath, tag)
}

// BuildProxy builds the egress proxy image and tags it tag, replacing any image of that name.
// The proxy binary, for the daemon's OS and architecture, is the one embedded in this program
// when `make engine` built it (then neither the source tree nor a Go toolchain is needed);
// otherwise `CGO_ENABLED=0 go build` of ./cmd/proxy of the engine's source (the working
// directory's module, else the tree or module-cache version this program was built from:
// sourceRoot). It goes into a temporary build context holding only
// that binary, the workload gate (./cmd/gate, got the same way) and a
// Dockerfile FROM scratch; then `docker build`. The image runs as
// 65532:65532, exposes 3128, has the entrypoint ["/maf-egress-proxy", "proxy"] and carries
// [LabelImage]=proxy and [LabelBinarySHA256].
//
// It fails when the daemon cannot tell its platform; when no binary for it is embedded and
// no source is found or go build fails; and when docker build fails.
func BuildProxy(ctx context.Context, dockerPath, tag string) error {
	return proxyImage().build(ctx, dockerPath, tag)
}

// proxyImage is the proxy image's recipe and binary.
func proxyImage() staticImage {
	return staticImage{what: "proxy", binary: proxyBinary, main: proxyMain, recipe: proxyDockerfile, embedded: true,
		extras: []extraBinary{{gateBinaryName, gateMain}}}
}
