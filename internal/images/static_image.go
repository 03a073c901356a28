package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// staticImage is an image built around one static Go binary and a Dockerfile that copies it
// in: the egress proxy, the fingerprint observer, the e2e target and client. Each says only
// where its binary comes from and what its recipe is; getting the binary for the daemon's
// platform, the build context, the staleness check and the build are the same for all.
type staticImage struct {
	what     string // names the binary in errors: "proxy", "observer"
	binary   string // the binary's file name in the build context
	main     string // its main package, relative to the module root
	recipe   string // the Dockerfile, with %s where the binary's SHA-256 goes
	embedded bool   // `make engine` may embed the binary in this program (see embedded.go)
	// extras are more binaries the recipe copies in beside the first, got the same way; the
	// image's digest label covers them all.
	extras []extraBinary
}

// extraBinary is one more static binary of an image: its file name and its main package.
type extraBinary struct{ binary, main string }

// ensure builds the image under tag unless the daemon already has an image of that tag built
// around the same binary ([LabelBinarySHA256]), holding the tag's build lock ([exclusive]). A build from source is cheap with Go's build
// cache, so a stale image is never mistaken for a current one.
func (im staticImage) ensure(ctx context.Context, dockerPath, tag string) error {
	return exclusive(ctx, tag, func() error { return im.make(ctx, dockerPath, tag, true) })
}

// build builds the image under tag, replacing any image of that name.
func (im staticImage) build(ctx context.Context, dockerPath, tag string) error {
	return im.make(ctx, dockerPath, tag, false)
}

func (im staticImage) make(ctx context.Context, dockerPath, tag string, unlessCurrent bool) error {
	dir, sum, err := im.context(ctx, dockerPath)
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	prev, err := imageID(ctx, dockerPath, tag)
	if err != nil {
		return err
	}
	if unlessCurrent && prev != "" {
		have, err := imageLabel(ctx, dockerPath, prev, LabelBinarySHA256)
		if err != nil || have == sum {
			return err
		}
	}
	return buildReplacing(ctx, dockerPath, tag, dir, prev)
}

// context writes a build context to a new temporary directory: the binary for the daemon's
// platform and the recipe as the Dockerfile with the binary's SHA-256 in place of its %s. It
// returns the directory (to be removed by the caller, even on failure) and the digest.
func (im staticImage) context(ctx context.Context, dockerPath string) (dir, sum string, err error) {
	goos, goarch, err := daemonPlatform(ctx, dockerPath)
	if err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", "maf-sandbox-image-")
	if err != nil {
		return "", "", fmt.Errorf("make build context: %w", err)
	}
	h := sha256.New()
	for i, b := range append([]extraBinary{{im.binary, im.main}}, im.extras...) {
		one := im
		one.binary, one.main = b.binary, b.main
		out := filepath.Join(dir, b.binary)
		if err := one.write(ctx, goos, goarch, out); err != nil {
			return dir, "", err
		}
		if i > 0 {
			h.Write([]byte("\x00" + b.binary + "\x00")) // one binary alone hashes as before
		}
		if err := hashFile(h, out); err != nil {
			return dir, "", fmt.Errorf("read %s: %w", b.binary, err)
		}
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(fmt.Sprintf(im.recipe, sum)), 0o644); err != nil {
		return dir, "", fmt.Errorf("write Dockerfile: %w", err)
	}
	return dir, sum, nil
}

// write writes the binary for goos/goarch to out: the embedded one when this program has it,
// otherwise one built from the module's source.
func (im staticImage) write(ctx context.Context, goos, goarch, out string) error {
	if !im.embedded {
		return goBuild(ctx, im.main, goos, goarch, out)
	}
	b, ok, err := embeddedBinary(im.binary, goos, goarch)
	if err != nil {
		return fmt.Errorf("read the embedded %s binary: %w", im.what, err)
	}
	if ok {
		if err := os.WriteFile(out, b, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", im.binary, err)
		}
		return nil
	}
	if err := goBuild(ctx, im.main, goos, goarch, out); err != nil {
		return fmt.Errorf("this binary embeds no %s binary for %s/%s (make engine builds one that does), "+
			"and building it from source failed: %w", im.what, goos, goarch, err)
	}
	return nil
}

func hashFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
