package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// A named image user is resolved through /etc/passwd: the storage base and written files
// belong to the guest, and root stays the owner of everything above the base.
func TestGuestIdentityOwnsTheBase(t *testing.T) {
	image := itest.DerivedImage(t, "true", "USER sandbox")
	b := itest.NewBackend(t)
	spec := itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
	sb := itest.Acquire(t, b, itest.NewKey(t), spec)
	ctx := itest.Context(t)
	if err := sb.WriteFile(ctx, "deep/file.txt", []byte("x"), "."); err != nil {
		t.Fatal(err)
	}
	got := itest.Sh(t, sb, "id -u; stat -c '%u:%g %n' /maf-sandbox /maf-sandbox/work /maf-sandbox/work/deep /maf-sandbox/work/deep/file.txt")
	want := "1000\n0:0 /maf-sandbox\n1000:1000 /maf-sandbox/work\n1000:1000 /maf-sandbox/work/deep\n1000:1000 /maf-sandbox/work/deep/file.txt\n"
	if got != want {
		t.Fatalf("ownership:\n%s\nwant:\n%s", got, want)
	}
	// The guest can change what it was given, and remove it.
	itest.Sh(t, sb, "echo more >> /maf-sandbox/work/deep/file.txt")
	if err := sb.Remove(ctx, "deep", ".", true); err != nil {
		t.Fatal(err)
	}
}

// An image whose user cannot be resolved is refused for files_out, and still serves a
// workload that needs no guest-writable inputs.
func TestUnresolvedIdentityIsRefusedForFilesOut(t *testing.T) {
	image := itest.DerivedImage(t, "rm /bin/id", "USER ghost")
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesOut))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	_, err := b.Acquire(itest.Context(t), key, spec)
	var cns *sandbox.CapabilityNotSupportedError
	if !errors.As(err, &cns) || !strings.Contains(err.Error(), "files_out") || !strings.Contains(err.Error(), "next acquire") {
		t.Fatalf("err = %v, want CapabilityNotSupported naming files_out", err)
	}
}

// An image without rm is refused for files_delete by the acquire-time probe; a failed probe
// is tried again on the next acquire and never removes the container.
func TestMissingRmFailsTheProbe(t *testing.T) {
	image := itest.DerivedImage(t, "rm /bin/rm", "")
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesDelete))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	for range 2 {
		_, err := b.Acquire(itest.Context(t), key, spec)
		if !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "rm probe") || !strings.Contains(err.Error(), image) {
			t.Fatalf("err = %v, want the rm probe to refuse files_delete", err)
		}
	}
	// Exec alone is served by the same container.
	exec := itest.BusyboxSpec(t, sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec))
	if _, err := b.Acquire(itest.Context(t), key, exec); err != nil {
		t.Fatalf("exec-only acquire: %v", err)
	}
}

// A storage base the guest replaced with a link fails the next acquire; so does a file.
func TestHostileStorageBaseFailsAcquire(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	spec := itest.FilesSpec(t)
	sb := itest.Acquire(t, b, key, spec)
	itest.Sh(t, sb, "mkdir -p /elsewhere && rm -rf /maf-sandbox/work && ln -s /elsewhere /maf-sandbox/work")
	_, err := b.Acquire(itest.Context(t), key, spec)
	var nc *sandbox.NotConfinedError
	if !errors.As(err, &nc) {
		t.Fatalf("acquire over a linked base = %v, want NotConfined", err)
	}
	itest.Sh(t, sb, "rm /maf-sandbox/work && echo x > /maf-sandbox/work")
	if _, err := b.Acquire(itest.Context(t), key, spec); !errors.Is(err, sandbox.ErrOS) {
		t.Fatalf("acquire over a file base = %v, want not-a-directory", err)
	}
	itest.Sh(t, sb, "rm /maf-sandbox/work && mkdir -m 0700 /maf-sandbox/work && echo keep > /maf-sandbox/work/k")
	if _, err := b.Acquire(itest.Context(t), key, spec); err != nil {
		t.Fatalf("acquire over an existing base: %v", err)
	}
	if got := itest.Sh(t, sb, "stat -c %a /maf-sandbox/work; cat /maf-sandbox/work/k"); got != "700\nkeep\n" {
		t.Fatalf("an existing base must be left as it is: %q", got)
	}
}
