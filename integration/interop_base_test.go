package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// plantUnrecordedBase runs, under the name and labels this engine gives key's container, one
// that records no storage base (as the reference implementation makes it), running script.
func plantUnrecordedBase(t *testing.T, key sandbox.Key, spec sandbox.Spec, script string) string {
	t.Helper()
	labels, err := label.Sandbox(key, spec.Kind, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--name", docker.ContainerName(key, spec.Kind, ""), "--network", "none"}
	for _, l := range labels {
		args = append(args, "--label", l.Key+"="+l.Value)
	}
	return dockertest.RunContainerCmd(t, spec.Image, []string{"sh", "-c", script}, args...)
}

// TestAcquireTakesOverAnUnrecordedDefaultBase: a container another implementation made for
// the key on the same daemon, with no recorded storage base, is the default base when that
// base is a directory in it: the acquire takes it over, files and all. Without the directory
// it is refused, typed.
func TestAcquireTakesOverAnUnrecordedDefaultBase(t *testing.T) {
	b := newBackend(t)
	spec := busyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))

	t.Run("the default base exists", func(t *testing.T) {
		key := newKey(t)
		id := plantUnrecordedBase(t, key, spec, "mkdir -p /maf-sandbox/work && echo planted > /maf-sandbox/work/mark && exec sleep 3600")
		// The planted container is running once its mark is there.
		for {
			out, _, err := dockertest.DockerErr(ctxT(t), "exec", id, "cat", "/maf-sandbox/work/mark")
			if err == nil && string(out) == "planted\n" {
				break
			}
			if ctxT(t).Err() != nil {
				t.Fatalf("the planted container never wrote its mark: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		sb := acquire(t, b, key, spec)
		if sb.InstanceID() != id {
			t.Fatalf("acquired instance %s, want the planted %s taken over", sb.InstanceID(), id)
		}
		res, err := sb.Exec(ctxT(t), sandbox.Shell("cat mark; pwd"), ".", 30*time.Second)
		if err != nil || res.ExitCode != 0 || res.Stdout() != "planted\n/maf-sandbox/work\n" {
			t.Fatalf("exec in the taken-over base = %+v, %v", res, err)
		}
		if got, err := sb.ReadFile(ctxT(t), "mark", ".", 64); err != nil || string(got) != "planted\n" {
			t.Fatalf("read the mark = %q, %v", got, err)
		}
		if again := acquire(t, b, key, spec); again.InstanceID() != id {
			t.Fatalf("a warm acquire gave instance %s, want %s", again.InstanceID(), id)
		}
	})
	t.Run("no default base", func(t *testing.T) {
		key := newKey(t)
		plantUnrecordedBase(t, key, spec, "exec sleep 3600")
		t.Cleanup(func() { _ = b.Dispose(ctxT(t), key, sandbox.DisposeOptions{}) })
		_, err := b.Acquire(ctxT(t), key, spec)
		var inv *sandbox.InvalidArgumentError
		if !errors.As(err, &inv) || !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "no directory at the default base") {
			t.Fatalf("acquire = %v, want an invalid argument naming the missing default base", err)
		}
	})
}

// TestSymlinkedParentWording: a write through a parent that is a link is refused as not
// confined, on every file plane, in words that say the component is not a real directory
// (what the reference implementation's hosts match on).
func TestSymlinkedParentWording(t *testing.T) {
	onEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := newBackend(t, plane)
		sb := acquire(t, b, newKey(t), busyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn)))
		if res, err := sb.Exec(ctxT(t), sandbox.Shell("ln -s /etc linked"), ".", 30*time.Second); err != nil || res.ExitCode != 0 {
			t.Fatalf("plant the link: %+v, %v", res, err)
		}
		err := sb.WriteFile(ctxT(t), "linked/x", []byte("x"), ".")
		var nc *sandbox.NotConfinedError
		if !errors.As(err, &nc) || !strings.Contains(err.Error(), "is a link, not a real directory") {
			t.Fatalf("write through a linked parent = %v, want not confined: a link, not a real directory", err)
		}
	})
}
