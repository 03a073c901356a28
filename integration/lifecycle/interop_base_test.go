package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
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
	b := itest.NewBackend(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))

	t.Run("the default base exists", func(t *testing.T) {
		key := itest.NewKey(t)
		id := plantUnrecordedBase(t, key, spec, "mkdir -p /maf-sandbox/work && echo planted > /maf-sandbox/work/mark && exec sleep 3600")
		// The planted container is running once its mark is there.
		for {
			out, _, err := dockertest.DockerErr(itest.Context(t), "exec", id, "cat", "/maf-sandbox/work/mark")
			if err == nil && string(out) == "planted\n" {
				break
			}
			if itest.Context(t).Err() != nil {
				t.Fatalf("the planted container never wrote its mark: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		sb := itest.Acquire(t, b, key, spec)
		if sb.InstanceID() != id {
			t.Fatalf("acquired instance %s, want the planted %s taken over", sb.InstanceID(), id)
		}
		res, err := sb.Exec(itest.Context(t), sandbox.Shell("cat mark; pwd"), ".", 30*time.Second)
		if err != nil || res.ExitCode != 0 || res.Stdout() != "planted\n/maf-sandbox/work\n" {
			t.Fatalf("exec in the taken-over base = %+v, %v", res, err)
		}
		if got, err := sb.ReadFile(itest.Context(t), "mark", ".", 64); err != nil || string(got) != "planted\n" {
			t.Fatalf("read the mark = %q, %v", got, err)
		}
		if again := itest.Acquire(t, b, key, spec); again.InstanceID() != id {
			t.Fatalf("a warm acquire gave instance %s, want %s", again.InstanceID(), id)
		}
	})
	t.Run("no default base", func(t *testing.T) {
		key := itest.NewKey(t)
		plantUnrecordedBase(t, key, spec, "exec sleep 3600")
		t.Cleanup(func() { _ = b.Dispose(itest.Context(t), key, sandbox.DisposeOptions{}) })
		_, err := b.Acquire(itest.Context(t), key, spec)
		var inv *sandbox.InvalidArgumentError
		if !errors.As(err, &inv) || !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "no directory at the default base") {
			t.Fatalf("acquire = %v, want an invalid argument naming the missing default base", err)
		}
	})
}
