package lifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// commitImage commits a variant of the busybox image under tag (setup runs in a container
// first, change is a Dockerfile instruction) and returns its image ID, which is removed when
// the test ends — whatever tag it still carries.
func commitImage(t *testing.T, tag, setup, change string) string {
	t.Helper()
	id := dockertest.RunContainer(t, dockertest.Busybox(t))
	dockertest.Docker(t, "exec", id, "sh", "-c", setup)
	dockertest.Docker(t, "commit", "--change", "LABEL maf-sandbox.test-image=derived", "--change", change, id, tag)
	image := strings.TrimSpace(dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", tag))
	t.Cleanup(func() { dockertest.DockerErr(context.Background(), "rmi", "-f", image) })
	return image
}

func imageFilesSpec(t *testing.T, image string) sandbox.Spec {
	return itest.BusyboxSpec(t, sandbox.WithImage(image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
}

// ownerOf writes a file through the file plane and returns its owner as the guest sees it.
func ownerOf(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	if err := sb.WriteFile(itest.Context(t), "owned.txt", []byte("x"), "."); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(itest.Sh(t, sb, "stat -c %u:%g /maf-sandbox/work/owned.txt /maf-sandbox/work | tr '\\n' ' '"))
}

// A fresh container of an image the backend has seen makes no identity read, no storage-base
// walk and no probe: its filesystem is its image's, learned from the first one. The base is
// still made, stamped with the image's resolved identity: on the archive plane by its one copy
// in before start, on the host plane beneath the proven process's root after start, which
// makes no call that the counting driver counts.
func TestAcquireFreshContainerOfKnownImageSkipsImageFacts(t *testing.T) {
	image := itest.DerivedImage(t, "true", "USER sandbox")
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b, ce := itest.NewCountingBackend(t, plane)
		spec := imageFilesSpec(t, image)
		itest.Acquire(t, b, itest.NewKey(t), spec)
		first := ce.Seen()
		if !slices.Contains(first, "read") || !slices.Contains(first, "exec") || !slices.Contains(first, "stat") {
			t.Fatalf("first acquire's calls %v: want the account-file read, the base walk and the probes", first)
		}
		ce.Reset()
		sb := itest.Acquire(t, b, itest.NewKey(t), spec)
		want := []string{"copy in"}
		used, _ := b.FilePlane(itest.Context(t))
		if used == actors.FilePlaneHost && !itest.SuiteExecChannel() {
			want = nil // with the exec channel, its supervisor is the one copy in (with the base's on the archive plane)
		}
		if got := ce.Seen(); !slices.Equal(got, want) {
			t.Fatalf("fresh acquire of a known image on the %s plane made %v, want %v", used, got, want)
		}
		if got := ownerOf(t, sb); got != "1000:1000 1000:1000" {
			t.Fatalf("owners %q, want the image's sandbox user", got)
		}
	})
}

// A container this backend did not create (another engine made it, its guest then changed
// /etc/passwd) is learned per instance even though the backend knows its image.
func TestAcquireAdoptedContainerResolvesPerInstance(t *testing.T) {
	image := itest.DerivedImage(t, "true", "USER sandbox")
	spec := imageFilesSpec(t, image)
	b, ce := itest.NewCountingBackend(t)
	itest.Acquire(t, b, itest.NewKey(t), spec) // the image is known: uid 1000

	key := itest.NewKey(t)
	other := itest.NewBackend(t)
	sb := itest.Acquire(t, other, key, spec)
	dockertest.Docker(t, "exec", "-u", "0", sb.InstanceID(), "sh", "-c",
		"sed -i 's/^sandbox:x:1000:1000:/sandbox:x:1234:1234:/' /etc/passwd")
	ce.Reset()
	adopted := itest.Acquire(t, b, key, spec)
	if adopted.InstanceID() != sb.InstanceID() {
		t.Fatalf("acquire made %s, want the existing %s adopted", adopted.InstanceID(), sb.InstanceID())
	}
	if !slices.Contains(ce.Seen(), "read") {
		t.Fatalf("adoption made %v: want the instance's own account files read", ce.Seen())
	}
	if got := ownerOf(t, adopted); !strings.HasPrefix(got, "1234:1234 ") {
		t.Fatalf("owners %q, want the instance's changed uid 1234 on the written file", got)
	}
}

// A tag moved to another image is not served the old image's facts: the cache is keyed by
// image ID.
func TestAcquireRetaggedImageIsNotServedStaleFacts(t *testing.T) {
	tag := "maf-sandbox-test/retag:" + strings.ToLower(itest.NewKey(t).Scope)
	first := commitImage(t, tag, "true", "USER sandbox")
	b, ce := itest.NewCountingBackend(t)
	spec := imageFilesSpec(t, tag)
	if got := ownerOf(t, itest.Acquire(t, b, itest.NewKey(t), spec)); got != "1000:1000 1000:1000" {
		t.Fatalf("first image owners %q, want 1000", got)
	}
	second := commitImage(t, tag, "sed -i 's/^sandbox:x:1000:1000:/sandbox:x:1234:1234:/' /etc/passwd", "USER sandbox")
	if second == first {
		t.Fatal("the recommit kept the image ID")
	}
	ce.Reset()
	sb := itest.Acquire(t, b, itest.NewKey(t), spec)
	if !slices.Contains(ce.Seen(), "read") {
		t.Fatalf("acquire of the retagged image made %v: want its account files read", ce.Seen())
	}
	if got := ownerOf(t, sb); got != "1234:1234 1234:1234" {
		t.Fatalf("retagged image owners %q, want the new image's uid 1234", got)
	}
}
