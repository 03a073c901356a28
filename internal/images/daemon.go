package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

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

// imageLabel returns the value of label on the image ref (an ID), "" when the label is absent.
func imageLabel(ctx context.Context, dockerPath, ref, label string) (string, error) {
	cmd := exec.CommandContext(ctx, dockerPath, "image", "inspect", "--format",
		`{{index .Config.Labels "`+label+`"}}`, ref)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w: %s", ref, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

// imageID returns the full ID of the image tag, "" when there is none. "image ls" answers an
// absent image with an empty list, so absence and a daemon failure are told apart without
// reading error text.
func imageID(ctx context.Context, dockerPath, tag string) (string, error) {
	cmd := exec.CommandContext(ctx, dockerPath, "image", "ls", "--no-trunc", "--format", "{{.ID}}", tag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("look up image %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		return ids[0], nil
	}
	return "", nil
}

// buildReplacing builds dir as tag and then drops prev, the image tag named before ("" for
// none), as [dropReplaced] does.
func buildReplacing(ctx context.Context, dockerPath, tag, dir, prev string) error {
	if err := dockerBuild(ctx, dockerPath, tag, dir); err != nil {
		return err
	}
	if prev != "" {
		dropReplaced(ctx, dockerPath, prev)
	}
	return nil
}

// dropReplaced removes the image old once a build has moved the tag off it, so that rebuilding
// an image whose source changed leaves no untagged image behind. It removes only an image no
// tag names any more — one the build left under the tag, or that someone else named, is kept
// — and without force, so one a container uses is kept too. A leftover is untidy, never
// harmful, so a refusal is not an error.
func dropReplaced(ctx context.Context, dockerPath, old string) {
	tags, err := exec.CommandContext(ctx, dockerPath, "image", "inspect", "--format", "{{len .RepoTags}}", old).Output()
	if err != nil || strings.TrimSpace(string(tags)) != "0" {
		return
	}
	_ = exec.CommandContext(ctx, dockerPath, "image", "rm", old).Run()
}

// imagePresent says whether the daemon has an image tag that also passes filters ("--filter",
// "label=..."). "image ls" answers an absent image with an empty list, so "missing" and "the
// daemon failed" are told apart without reading error text.
func imagePresent(ctx context.Context, dockerPath, tag string, filters ...string) (bool, error) {
	args := append(append([]string{"image", "ls", "--quiet"}, filters...), tag)
	cmd := exec.CommandContext(ctx, dockerPath, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("look up image %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return len(bytes.TrimSpace(out)) > 0, nil
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
