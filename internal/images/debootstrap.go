package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bootstrap is a Debian root filesystem made with debootstrap: the images of this package
// that need Debian's packages (python, sshd) are built from one.
type bootstrap struct {
	what     string // the image, for messages ("the python image")
	suite    string
	variant  string
	packages []string
	mirror   string
}

// build bootstraps b, trims documentation and caches, lets prepare change the tree (nil: no
// change), and imports it as tag with the Dockerfile instructions changes. It needs root and
// debootstrap on the host, and the mirror; it fails saying which is missing.
func (b bootstrap) build(ctx context.Context, dockerPath, tag string, prepare func(root string) error, changes ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("build %s: debootstrap needs root", b.what)
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return fmt.Errorf("build %s: %w (apt-get install debootstrap)", b.what, err)
	}
	dir, err := os.MkdirTemp("", "maf-rootfs-")
	if err != nil {
		return fmt.Errorf("build %s: %w", b.what, err)
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "rootfs")
	boot := exec.CommandContext(ctx, "debootstrap", "--variant="+b.variant, "--include="+strings.Join(b.packages, ","),
		b.suite, root, b.mirror)
	if out, err := boot.CombinedOutput(); err != nil {
		return fmt.Errorf("debootstrap %s from %s: %w: %s", b.suite, b.mirror, err, lastLines(out, 10))
	}
	// Trimmed: what a container never reads makes every container creation slower.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
		"usr/share/info", "usr/share/locale", "var/log"} {
		full := filepath.Join(root, p)
		entries, _ := os.ReadDir(full)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(full, e.Name()))
		}
	}
	if prepare != nil {
		if err := prepare(root); err != nil {
			return fmt.Errorf("build %s: %w", b.what, err)
		}
	}
	return importRoot(ctx, dockerPath, root, tag, changes)
}

// importRoot imports the tree root as the image tag (docker import), with the Dockerfile
// instructions changes.
func importRoot(ctx context.Context, dockerPath, root, tag string, changes []string) error {
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root, "-c", ".")
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	imp := exec.CommandContext(ctx, dockerPath, append(args, "-", tag)...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("import %s: %w", tag, err)
	}
	imp.Stdin = pipe
	var stderr, tarErr bytes.Buffer
	imp.Stderr, tarCmd.Stderr = &stderr, &tarErr
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("import %s: tar: %w", tag, err)
	}
	if err := imp.Run(); err != nil {
		_ = tarCmd.Process.Kill()
		_ = tarCmd.Wait()
		return fmt.Errorf("import %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := tarCmd.Wait(); err != nil {
		return fmt.Errorf("import %s: tar: %w: %s", tag, err, bytes.TrimSpace(tarErr.Bytes()))
	}
	return nil
}
