package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PythonTag is the tag of the Python workload image that host-tools tests and the demo run.
const PythonTag = "maf-sandbox-test/python:local"

// LabelInputs is the label holding a hash of the inputs an image was built from; an image
// whose label matches the current inputs is current and is not rebuilt.
const LabelInputs = "maf-sandbox.test-image-inputs"

// EnvDebianMirror names the Debian mirror the Python image is bootstrapped from; unset, the
// first deb.debian.org-style URI of apt's configured sources is used.
const EnvDebianMirror = "MAF_SANDBOX_DEBIAN_MIRROR"

// pythonRecipe is the Python image's recipe; changing any field changes the inputs hash.
type pythonRecipe struct {
	Suite    string
	Variant  string
	Packages []string
	Mirror   string
	Version  int // bump when the steps below change
}

func currentPythonRecipe() (pythonRecipe, error) {
	mirror, err := debianMirror()
	if err != nil {
		return pythonRecipe{}, err
	}
	return pythonRecipe{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3"}, Mirror: mirror, Version: 1}, nil
}

func (r pythonRecipe) hash() string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%s|%d", r.Suite, r.Variant, strings.Join(r.Packages, ","), r.Mirror, r.Version)))
	return hex.EncodeToString(h[:8])
}

// debianMirror is [EnvDebianMirror], else the first Debian (not security) URI in apt's
// sources.
func debianMirror() (string, error) {
	if m := os.Getenv(EnvDebianMirror); m != "" {
		return m, nil
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	files = append([]string{"/etc/apt/sources.list"}, files...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			for _, field := range strings.Fields(sc.Text()) {
				if strings.HasPrefix(field, "#") {
					break
				}
				if (strings.HasPrefix(field, "http://") || strings.HasPrefix(field, "https://")) &&
					strings.HasSuffix(strings.TrimSuffix(field, "/"), "/debian") {
					return field, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no Debian mirror in apt's sources; set %s", EnvDebianMirror)
}

// EnsurePython builds the Python image under tag with [BuildPython] unless the engine already
// has one whose [LabelInputs] matches the current recipe (suite, variant, packages, mirror);
// processes that ensure it at once build it once. [WithBuildNotice] hears of a build.
func EnsurePython(ctx context.Context, dockerPath, tag string, opts ...EnsureOpt) error {
	o := ensureOpts(opts)
	r, err := currentPythonRecipe()
	if err != nil {
		return err
	}
	return exclusive(ctx, tag, func() error {
		if have, err := imagePresent(ctx, dockerPath, tag, "--filter", "label="+LabelInputs+"="+r.hash()); err != nil || have {
			return err
		}
		o.notice()
		return buildPython(ctx, dockerPath, tag, r)
	})
}

// BuildPython bootstraps Debian (bookworm, --variant=minbase, with python3) with debootstrap
// from the mirror of [EnvDebianMirror] or apt's sources, trims documentation and caches, and
// imports it as tag with CMD /bin/sh, [LabelTestImage]=python and [LabelInputs]. It needs
// root and debootstrap on the host, and the mirror; it fails saying which is missing.
func BuildPython(ctx context.Context, dockerPath, tag string) error {
	r, err := currentPythonRecipe()
	if err != nil {
		return err
	}
	return buildPython(ctx, dockerPath, tag, r)
}

func buildPython(ctx context.Context, dockerPath, tag string, r pythonRecipe) error {
	boot := bootstrap{what: "the python image", suite: r.Suite, variant: r.Variant, packages: r.Packages, mirror: r.Mirror}
	return boot.build(ctx, dockerPath, tag, nil, `CMD ["/bin/sh"]`, "LABEL "+LabelTestImage+"=python", "LABEL "+LabelInputs+"="+r.hash())
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
