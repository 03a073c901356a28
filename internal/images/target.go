package images

import (
	"context"
)

// TargetTag is the offline fixture's HTTPS target server image (egress-and-reap.md §5.4): the
// static e2e program FROM scratch, serving GET / → 200 on :443 with the certificate in
// E2E_CERT and E2E_KEY.
const TargetTag = "maf-sandbox-test/e2e-target:local"

// ClientTag is the busybox test image with the same program at /usr/bin/maf-e2e, the
// workload's client in the egress tests (its "get" verb honours HTTPS_PROXY).
const ClientTag = "maf-sandbox-test/e2e-client:local"

const e2eMain = "./internal/images/cmd/e2e"

const targetDockerfile = `FROM scratch
COPY maf-e2e /maf-e2e
USER 65532:65532
EXPOSE 443
LABEL ` + LabelTestImage + `=e2e-target
LABEL ` + LabelBinarySHA256 + `=%s
ENTRYPOINT ["/maf-e2e", "serve"]
`

// EnsureTarget builds the target image under [TargetTag] unless it is current. Listening on
// 443 as an unprivileged user needs the engine's default unprivileged-port sysctl or
// --user 0; tests run it as root inside its own network namespace.
func EnsureTarget(ctx context.Context, dockerPath string) error {
	return ensureGo(ctx, dockerPath, TargetTag, targetDockerfile)
}

// EnsureClient builds [ClientTag] FROM the local busybox image base (never pulled).
func EnsureClient(ctx context.Context, dockerPath, base string) error {
	recipe := "FROM " + base + "\nCOPY maf-e2e /usr/bin/maf-e2e\nLABEL " + LabelTestImage + "=e2e-client\nLABEL " +
		LabelBinarySHA256 + "=%s\n"
	return ensureGo(ctx, dockerPath, ClientTag, recipe)
}

// ensureGo builds the e2e program's image from recipe under tag unless it is current; the
// program is always built from source (make engine embeds only the product binaries).
func ensureGo(ctx context.Context, dockerPath, tag, recipe string) error {
	return staticImage{what: "e2e", binary: "maf-e2e", main: e2eMain, recipe: recipe}.ensure(ctx, dockerPath, tag)
}
