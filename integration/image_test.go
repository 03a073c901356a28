package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// derivedImage commits a variant of the busybox image: setup runs in a container first, and
// change is a Dockerfile instruction applied by the commit. The image is removed afterwards.
func derivedImage(t *testing.T, setup, change string) string {
	t.Helper()
	base := dockertest.Busybox(t)
	tag := "maf-sandbox-test/derived:" + strings.ToLower(newKey(t).Scope)
	id := dockertest.RunContainer(t, base)
	dockertest.Docker(t, "exec", id, "sh", "-c", setup)
	args := []string{"commit", "--change", "LABEL maf-sandbox.test-image=derived"}
	if change != "" {
		args = append(args, "--change", change)
	}
	dockertest.Docker(t, append(args, id, tag)...)
	t.Cleanup(func() { dockertest.DockerErr(context.Background(), "rmi", "-f", tag) })
	return tag
}

// A named image user is resolved through /etc/passwd: the storage base and written files
// belong to the guest, and root stays the owner of everything above the base.
func TestGuestIdentityOwnsTheBase(t *testing.T) {
	image := derivedImage(t, "true", "USER sandbox")
	b := newBackend(t)
	spec := busyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	sb := acquire(t, b, newKey(t), spec)
	ctx := ctxT(t)
	if err := sb.WriteFile(ctx, "deep/file.txt", []byte("x"), "."); err != nil {
		t.Fatal(err)
	}
	got := sh(t, sb, "id -u; stat -c '%u:%g %n' /maf-sandbox /maf-sandbox/work /maf-sandbox/work/deep /maf-sandbox/work/deep/file.txt")
	want := "1000\n0:0 /maf-sandbox\n1000:1000 /maf-sandbox/work\n1000:1000 /maf-sandbox/work/deep\n1000:1000 /maf-sandbox/work/deep/file.txt\n"
	if got != want {
		t.Fatalf("ownership:\n%s\nwant:\n%s", got, want)
	}
	// The guest can change what it was given, and remove it.
	sh(t, sb, "echo more >> /maf-sandbox/work/deep/file.txt")
	if err := sb.Remove(ctx, "deep", ".", true); err != nil {
		t.Fatal(err)
	}
}

// An image whose user cannot be resolved is refused for files_out, and still serves a
// workload that needs no guest-writable inputs.
func TestUnresolvedIdentityIsRefusedForFilesOut(t *testing.T) {
	image := derivedImage(t, "rm /bin/id", "USER ghost")
	b := newBackend(t)
	key := newKey(t)
	spec := busyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesOut))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	_, err := b.Acquire(ctxT(t), key, spec)
	var cns *sandbox.CapabilityNotSupportedError
	if !errors.As(err, &cns) || !strings.Contains(err.Error(), "files_out") || !strings.Contains(err.Error(), "next acquire") {
		t.Fatalf("err = %v, want CapabilityNotSupported naming files_out", err)
	}
}

// An image without rm is refused for files_delete by the acquire-time probe; a failed probe
// is tried again on the next acquire and never removes the container.
func TestMissingRmFailsTheProbe(t *testing.T) {
	image := derivedImage(t, "rm /bin/rm", "")
	b := newBackend(t)
	key := newKey(t)
	spec := busyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesDelete))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	for range 2 {
		_, err := b.Acquire(ctxT(t), key, spec)
		if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "rm probe") || !strings.Contains(err.Error(), image) {
			t.Fatalf("err = %v, want the rm probe to refuse files_delete", err)
		}
	}
	// Exec alone is served by the same container.
	exec := busyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec))
	if _, err := b.Acquire(ctxT(t), key, exec); err != nil {
		t.Fatalf("exec-only acquire: %v", err)
	}
}

// A storage base the guest replaced with a link fails the next acquire; so does a file.
func TestHostileStorageBaseFailsAcquire(t *testing.T) {
	b := newBackend(t)
	key := newKey(t)
	spec := filesSpec(t)
	sb := acquire(t, b, key, spec)
	sh(t, sb, "mkdir -p /elsewhere && rm -rf /maf-sandbox/work && ln -s /elsewhere /maf-sandbox/work")
	_, err := b.Acquire(ctxT(t), key, spec)
	var nc *sandbox.NotConfinedError
	if !errors.As(err, &nc) {
		t.Fatalf("acquire over a linked base = %v, want NotConfined", err)
	}
	sh(t, sb, "rm /maf-sandbox/work && echo x > /maf-sandbox/work")
	if _, err := b.Acquire(ctxT(t), key, spec); !errors.Is(err, sandbox.ErrOS) {
		t.Fatalf("acquire over a file base = %v, want not-a-directory", err)
	}
	sh(t, sb, "rm /maf-sandbox/work && mkdir -m 0700 /maf-sandbox/work && echo keep > /maf-sandbox/work/k")
	if _, err := b.Acquire(ctxT(t), key, spec); err != nil {
		t.Fatalf("acquire over an existing base: %v", err)
	}
	if got := sh(t, sb, "stat -c %a /maf-sandbox/work; cat /maf-sandbox/work/k"); got != "700\nkeep\n" {
		t.Fatalf("an existing base must be left as it is: %q", got)
	}
}
