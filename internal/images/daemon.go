package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"unicode"
)

// goBuild builds the static binary of main, a package path relative to the engine module's
// root ([sourceRoot]), for goos/goarch, to out. The flags are those of `make engine`, so both
// ways give the same binary from the same tree.
func goBuild(ctx context.Context, main, goos, goarch, out string) error {
	root, err := sourceRoot(ctx)
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

// enginePath is the module whose source goBuild builds from.
const enginePath = "github.com/mafsandbox/engine"

// sourceRoot finds the engine module's source, for a binary that embeds none of the programs
// it runs in containers: the module of the working directory when it is the engine's (a
// developer in the tree); else the tree this package was compiled from, which a plain
// `go build` or `go install` records in the binary (a checkout, or the module cache); else,
// for a binary built with -trimpath from a released version, that version in the module
// cache. Each needs the Go toolchain; a binary built with `make engine` needs none of this.
func sourceRoot(ctx context.Context) (string, error) {
	var tried []string
	if root, err := moduleRoot(ctx); err == nil && isEngineModule(root) {
		return root, nil
	} else if err != nil {
		tried = append(tried, err.Error())
	}
	for _, dir := range []string{compiledRoot(), moduleCacheRoot(ctx)} {
		if dir != "" && isEngineModule(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("the engine's source (module %s) is not in the working directory, where this binary was built, or the module cache (%s): "+
		"build the engine with make engine, which embeds what it runs in containers, or run it from its source tree with the Go toolchain installed",
		enginePath, strings.Join(append(tried, "no source found"), "; "))
}

// compiledRoot is the module root this file was compiled in: two directories up from its
// path as the compiler recorded it, when that path is absolute (not under -trimpath).
func compiledRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// moduleCacheRoot is the released version of the engine this binary was built from, in the
// module cache, as `go install module/cmd/engine@version` leaves it; "" for a development
// build or with no toolchain to ask where the cache is.
func moduleCacheRoot(ctx context.Context) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != enginePath || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return ""
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return moduleCacheDir(strings.TrimSpace(string(out)), bi.Main.Path, bi.Main.Version)
}

// moduleCacheDir is where the module cache at cache keeps path at version: upper-case
// letters are written as '!' and the letter in lower case.
func moduleCacheDir(cache, path, version string) string {
	var b strings.Builder
	for _, r := range path + "@" + version {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return filepath.Join(cache, filepath.FromSlash(b.String()))
}

// isEngineModule reports whether dir holds the engine module's go.mod.
func isEngineModule(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == enginePath {
			return true
		}
	}
	return false
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
