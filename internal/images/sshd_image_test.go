package images_test

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// TestSSHDImage builds (or finds) the sshd image and checks what the ssh:// tests rely on: sshd
// and the docker client, none of the daemon's binaries and no host key of its own.
func TestSSHDImage(t *testing.T) {
	image := dockertest.SSHD(t)
	id := dockertest.RunContainer(t, image)
	cases := []struct{ name, cmd, want string }{
		{"sshd and the docker client", "command -v sshd; command -v docker", "/usr/sbin/sshd\n/usr/bin/docker"},
		{"no daemon", "ls /usr/sbin/dockerd /usr/bin/containerd /usr/sbin/runc 2>/dev/null; true", ""},
		{"no host key of its own", "ls /etc/ssh/ | grep -c ssh_host_; true", "0"},
		{"keys only", "grep -E '^(PasswordAuthentication|PermitRootLogin) ' /etc/ssh/sshd_config.d/maf-sandbox.conf",
			"PasswordAuthentication no\nPermitRootLogin prohibit-password"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := dockertest.Docker(t, "exec", id, "sh", "-c", tc.cmd); got != tc.want {
				t.Fatalf("%s: got %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
	if label := dockertest.Docker(t, "image", "inspect", "--format", `{{index .Config.Labels "`+images.LabelTestImage+`"}}`, image); label != "sshd" {
		t.Fatalf("label %s = %q, want sshd", images.LabelTestImage, label)
	}
	// The image is current, so a second ensure builds nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := images.EnsureSSHD(ctx, "docker", image); err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("EnsureSSHD again: %v after %s", err, time.Since(start))
	}
}
