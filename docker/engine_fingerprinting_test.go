package docker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// TestEngineFingerprinting holds the engine to the fingerprint seam: the change list, the
// confinement inspect, the image ID, and the observer run with its exit code, separate
// streams, output bound and removal.
func TestEngineFingerprinting(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	var f docker.Fingerprinting = e
	// An entrypoint of its own, so the confinement inspect is seen to read it.
	name, id := workload(t, e, image, testKey(t), docker.WithEntrypoint("sleep"), docker.WithCmd("infinity"))
	t.Run("changes", func(t *testing.T) { wantChanges(t, e, f, name, id) })
	t.Run("confinement", func(t *testing.T) { wantConfinement(t, f, name, id) })
	imageID := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", image)
	t.Run("image", func(t *testing.T) {
		rec, err := f.InspectImage(testCtx(t), image)
		if err != nil || rec.ID != imageID || len(rec.Volumes) != 0 {
			t.Fatalf("image %+v, %v; want %s and no volumes", rec, err, imageID)
		}
		if _, err := f.InspectImage(testCtx(t), "maf-sandbox-test/absent:never"); !errors.Is(err, docker.ErrNotFound) {
			t.Fatalf("an absent image: %v, want ErrNotFound", err)
		}
	})
	o := observer{f: f, image: imageID, target: id}
	t.Run("observer run", func(t *testing.T) {
		// It sees the workload's processes: pid 1 of its namespace is the workload's sleep.
		out, err := o.run(t, "streams", 1<<10, "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo err >&2; exit 3")
		if err != nil || out.ExitCode != 3 || string(out.Stdout) != "sleep infinity \n" || string(out.Stderr) != "err\n" {
			t.Fatalf("observer run: %+v (stdout %q, stderr %q), %v", out, out.Stdout, out.Stderr, err)
		}
	})
	t.Run("observer output bound", func(t *testing.T) {
		if _, err := o.run(t, "bound", 100, "yes | head -c 5000"); !errors.Is(err, docker.ErrOutputLimit) {
			t.Fatalf("an observer over its bound: %v, want ErrOutputLimit", err)
		}
	})
}

// wantChanges holds the change list to a fresh container's (empty), to a planted file, and
// to the refusals of an absent container and of a name where a full ID is due.
func wantChanges(t *testing.T, e docker.Containers, f docker.Fingerprinting, name, id string) {
	t.Helper()
	if cs, err := f.Changes(testCtx(t), id); err != nil || len(cs) != 0 {
		t.Fatalf("a fresh container's changes: %v, %v; want none", cs, err)
	}
	res, err := e.Exec(testCtx(t), docker.ExecRequest{Target: id, Argv: []string{"sh", "-c", "echo x > /tmp/planted"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("plant: %v %+v", err, res)
	}
	cs, err := f.Changes(testCtx(t), id)
	if err != nil || !slices.Contains(cs, docker.Change{Kind: docker.ChangeAdded, Path: "/tmp/planted"}) {
		t.Fatalf("changes %v, %v; want A /tmp/planted among them", cs, err)
	}
	if _, err := f.Changes(testCtx(t), strings.Repeat("f", 64)); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("changes of an absent container: %v, want ErrNotFound", err)
	}
	if _, err := f.Changes(testCtx(t), name); !errors.Is(err, docker.ErrInvalid) {
		t.Fatalf("changes by name: %v, want ErrInvalid", err)
	}
}

// wantConfinement holds the confinement inspect to what a hardened workload shows (its own
// PID namespace, not privileged, no declared mount, the engine's managed files in its own
// directory, the entrypoint it was created with) and to ErrNotFound for an absent container.
func wantConfinement(t *testing.T, f docker.Fingerprinting, name, id string) {
	t.Helper()
	c, err := f.InspectConfinement(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != id || !c.Running || c.StartedAt == "" || (c.PidMode != "" && c.PidMode != "private") || c.Privileged ||
		len(c.Mounts) != 0 || !strings.HasSuffix(c.HostsPath, "/"+id+"/hosts") || c.HostnamePath == "" || c.ResolvConfPath == "" ||
		!slices.Equal(c.Entrypoint, []string{"sleep"}) {
		t.Fatalf("confinement %+v", c)
	}
	if _, err := f.InspectConfinement(testCtx(t), "maf-sandbox-enginetest-absent"); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("inspect of an absent container: %v, want ErrNotFound", err)
	}
}

// observer runs scripts as observers of one workload.
type observer struct {
	f      docker.Fingerprinting
	image  string
	target string
}

// run runs script as an observer with an output bound of max and fails t if the observer
// container outlives the run.
func (o observer) run(t *testing.T, suffix string, max int64, script string) (docker.ObserverOutput, error) {
	t.Helper()
	spec := docker.ObserverSpec{Name: "maf-fingerprint-enginetest-" + suffix + "-" + dockertest.Process(), Image: o.image,
		Target: o.target, Args: []string{"sh", "-c", script}, MaxOutputBytes: max, Timeout: time.Minute}
	out, err := o.f.RunObserver(testCtx(t), spec)
	left, _, lerr := dockertest.DockerErr(context.Background(), "ps", "-a", "-q", "--filter", "name=^/"+spec.Name+"$")
	if lerr != nil || strings.TrimSpace(string(left)) != "" {
		t.Fatalf("observer %s outlived its run: %q %v", spec.Name, left, lerr)
	}
	return out, err
}
