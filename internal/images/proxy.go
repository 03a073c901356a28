package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// proxyMain is the package of the proxy's main, relative to the module root.
const proxyMain = "./cmd/proxy"

// proxyDockerfile is the whole recipe (egress-and-reap.md §2.7): the static binary alone, run
// as an unprivileged numeric user. FROM scratch needs no pull.
const proxyDockerfile = `FROM scratch
COPY ` + proxyBinary + ` /` + proxyBinary + `
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
	dir, sum, err := binaryContext(ctx, dockerPath, proxyBinary, proxyDockerfile, writeProxy)
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

// BuildProxy builds the egress proxy image and tags it tag, replacing any image of that name.
// The proxy binary, for the daemon's OS and architecture, is the one embedded in this program
// when `make engine` built it (then neither the source tree nor a Go toolchain is needed);
// otherwise `CGO_ENABLED=0 go build` of ./cmd/proxy of the module that holds the working
// directory (found with `go env GOMOD`). It goes into a temporary build context holding only
// that binary and a Dockerfile FROM scratch; then `docker build`. The image runs as
// 65532:65532, exposes 3128, has the entrypoint ["/maf-egress-proxy", "proxy"] and carries
// [LabelImage]=proxy and [LabelBinarySHA256].
//
// It fails when the daemon cannot tell its platform; when no binary for it is embedded and
// the working directory is not inside a module or go build fails; and when docker build fails.
func BuildProxy(ctx context.Context, dockerPath, tag string) error {
	dir, _, err := binaryContext(ctx, dockerPath, proxyBinary, proxyDockerfile, writeProxy)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	return dockerBuild(ctx, dockerPath, tag, dir)
}

// writeProxy writes the proxy binary for goos/goarch to out: the embedded one, or one built
// from the module's source.
func writeProxy(ctx context.Context, goos, goarch, out string) error {
	b, ok, err := embeddedProxy(goos, goarch)
	if err != nil {
		return fmt.Errorf("read the embedded proxy binary: %w", err)
	}
	if ok {
		if err := os.WriteFile(out, b, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", proxyBinary, err)
		}
		return nil
	}
	if err := goBuild(ctx, proxyMain, goos, goarch, out); err != nil {
		return fmt.Errorf("this binary embeds no proxy binary for %s/%s (make engine builds one that does), "+
			"and building it from source failed: %w", goos, goarch, err)
	}
	return nil
}

// goBinaryContext is [binaryContext] with the binary built from main, a package path relative
// to the module root.
func goBinaryContext(ctx context.Context, dockerPath, main, binary, recipe string) (dir, sum string, err error) {
	return binaryContext(ctx, dockerPath, binary, recipe, func(ctx context.Context, goos, goarch, out string) error {
		return goBuild(ctx, main, goos, goarch, out)
	})
}

// binaryContext writes a build context to a new temporary directory: the static binary write
// produces for the daemon's platform, named binary, and recipe as the Dockerfile with the
// binary's SHA-256 in place of its %s. It returns the directory (to be removed by the caller,
// even on failure) and the digest.
func binaryContext(ctx context.Context, dockerPath, binary, recipe string,
	write func(ctx context.Context, goos, goarch, out string) error) (dir, sum string, err error) {
	goos, goarch, err := daemonPlatform(ctx, dockerPath)
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "maf-sandbox-image-")
	if err != nil {
		return "", "", fmt.Errorf("make build context: %w", err)
	}
	out := filepath.Join(dir, binary)
	if err := write(ctx, goos, goarch, out); err != nil {
		return dir, "", err
	}
	f, err := os.Open(out)
	if err != nil {
		return dir, "", fmt.Errorf("read %s: %w", binary, err)
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return dir, "", fmt.Errorf("read %s: %w", binary, err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(fmt.Sprintf(recipe, sum)), 0o644); err != nil {
		return dir, "", fmt.Errorf("write Dockerfile: %w", err)
	}
	return dir, sum, nil
}

// goBuild builds the static binary of main, a package path relative to the root of the module
// that holds the working directory, for goos/goarch, to out. The flags are those of
// `make engine`, so both ways give the same binary from the same tree.
func goBuild(ctx context.Context, main, goos, goarch, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, main)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", main, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// moduleRoot returns the directory of the go.mod that governs the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: the working directory is not inside the engine's module")
	}
	return filepath.Dir(gomod), nil
}

// daemonPlatform asks the daemon which OS and architecture its containers run.
func daemonPlatform(ctx context.Context, dockerPath string) (goos, goarch string, err error) {
	cmd := exec.CommandContext(ctx, dockerPath, "version", "--format", "{{.Server.Os}} {{.Server.Arch}}")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("ask the daemon its platform: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", "", fmt.Errorf("ask the daemon its platform: unexpected answer %q", out)
	}
	return f[0], f[1], nil
}

// imageLabel returns the value of label on the image tag, or "" when the image or the label
// is absent. "image ls" answers an absent image with an empty list, so absence and a daemon
// failure are told apart without reading error text.
func imageLabel(ctx context.Context, dockerPath, tag, label string) (string, error) {
	cmd := exec.CommandContext(ctx, dockerPath, "image", "ls", "--no-trunc", "--format",
		"{{.ID}}", tag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("look up image %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return "", nil
	}
	cmd = exec.CommandContext(ctx, dockerPath, "image", "inspect", "--format",
		`{{index .Config.Labels "`+label+`"}}`, ids[0])
	stderr.Reset()
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		return "", fmt.Errorf("inspect image %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

// dockerBuild builds the context dir as tag, pulling nothing.
func dockerBuild(ctx context.Context, dockerPath, tag, dir string) error {
	cmd := exec.CommandContext(ctx, dockerPath, "build", "--quiet", "--tag", tag, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker build %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
