package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SSHDTag is the tag of the test image that plays a remote Docker host reached over ssh://:
// Debian's openssh-server and the docker client of Debian's docker.io. A test lends it the
// daemon's socket, its own host key and the key it may log in with.
const SSHDTag = "maf-sandbox-test/sshd:local"

// sshdConfig is the image's sshd configuration: keys only, root may log in with one, and the
// one host key is the file a test mounts.
const sshdConfig = `PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PrintMotd no
HostKey /etc/ssh/ssh_host_ed25519_key
`

// sshdRecipe is the sshd image's recipe; changing any field changes the inputs hash.
type sshdRecipe struct {
	Suite    string
	Variant  string
	Packages []string
	Mirror   string
	Version  int // bump when the steps below change
}

func currentSSHDRecipe() (sshdRecipe, error) {
	mirror, err := debianMirror()
	if err != nil {
		return sshdRecipe{}, err
	}
	return sshdRecipe{Suite: "bookworm", Variant: "minbase", Packages: []string{"openssh-server", "docker.io"}, Mirror: mirror, Version: 1}, nil
}

func (r sshdRecipe) hash() string {
	h := sha256.Sum256([]byte(fmt.Sprintf("sshd|%s|%s|%s|%s|%d", r.Suite, r.Variant, strings.Join(r.Packages, ","), r.Mirror, r.Version)))
	return hex.EncodeToString(h[:8])
}

// EnsureSSHD builds the sshd image under tag unless the engine already has one whose
// [LabelInputs] matches the current recipe; processes that ensure it at once build it once.
// It bootstraps Debian (bookworm, --variant=minbase, with openssh-server and docker.io) with
// debootstrap, keeps the docker client and drops the daemon's binaries (the image reaches the
// daemon whose socket a test mounts), drops the generated host keys (each container gets the
// one its test made), and imports it with CMD sshd -D -e, [LabelTestImage]=sshd and
// [LabelInputs]. It needs root, debootstrap and the mirror, as the Python image does.
func EnsureSSHD(ctx context.Context, dockerPath, tag string) error {
	r, err := currentSSHDRecipe()
	if err != nil {
		return err
	}
	return exclusive(ctx, tag, func() error {
		if have, err := imagePresent(ctx, dockerPath, tag, "--filter", "label="+LabelInputs+"="+r.hash()); err != nil || have {
			return err
		}
		boot := bootstrap{what: "the sshd image", suite: r.Suite, variant: r.Variant, packages: r.Packages, mirror: r.Mirror}
		return boot.build(ctx, dockerPath, tag, prepareSSHD, `CMD ["/usr/sbin/sshd", "-D", "-e"]`,
			"LABEL "+LabelTestImage+"=sshd", "LABEL "+LabelInputs+"="+r.hash())
	})
}

// prepareSSHD trims the bootstrapped tree to a client host: the daemon's binaries and the
// generated host keys go, the configuration and sshd's privilege-separation directory come.
func prepareSSHD(root string) error {
	for _, p := range []string{"usr/sbin/dockerd", "usr/sbin/docker-proxy", "usr/sbin/runc", "usr/bin/containerd",
		"usr/bin/containerd-shim", "usr/bin/containerd-shim-runc-v1", "usr/bin/containerd-shim-runc-v2", "usr/bin/ctr"} {
		if err := os.Remove(filepath.Join(root, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	keys, err := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/ssh/sshd_config.d/maf-sandbox.conf"), []byte(sshdConfig), 0o644); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(root, "run/sshd"), 0o755)
}
