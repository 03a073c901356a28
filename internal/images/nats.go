package images

import (
	"context"
)

// NATSTag is the tag the NATS server image is built under by default.
const NATSTag = "maf-sandbox/nats-server:local"

// natsBinary is the server's path in the image.
const natsBinary = "nats-server"

// natsMain is the server's main package: the module's own dependency (go.mod requires it for
// the tests' embedded server), so the binary is the very version the engine is tested with
// and building it needs nothing beyond the module cache.
const natsMain = "github.com/nats-io/nats-server/v2"

// natsDockerfile is the whole recipe: the static server alone, FROM scratch, as an
// unprivileged numeric user. The image declares no volume: whoever runs it mounts the
// JetStream store (a volume, or a tmpfs owned by 65532 in the tests) and passes -sd.
const natsDockerfile = `FROM scratch
COPY ` + natsBinary + ` /` + natsBinary + `
USER 65532:65532
EXPOSE 4222 6222 8222
LABEL ` + LabelImage + `=nats-server
LABEL ` + LabelBinarySHA256 + `=%s
ENTRYPOINT ["/` + natsBinary + `"]
`

// EnsureNATS builds the NATS server image under tag unless the daemon already has one built
// around the same binary ([LabelBinarySHA256]), as [EnsureProxy] does. The binary is
// `CGO_ENABLED=0 go build` of the nats-server main package at the version go.mod requires, for
// the daemon's platform; no binary is embedded, so it needs the module's source tree and a Go
// toolchain. The image's entrypoint is /nats-server (its flags are the container's command),
// it runs as 65532:65532, exposes 4222 (clients), 6222 (routes) and 8222 (monitoring) and
// carries [LabelImage]=nats-server.
//
// It fails when the daemon cannot tell its platform, when go build fails and when docker
// build fails.
func EnsureNATS(ctx context.Context, dockerPath, tag string) error {
	return staticImage{what: "nats-server", binary: natsBinary, main: natsMain, recipe: natsDockerfile}.ensure(ctx, dockerPath, tag)
}
