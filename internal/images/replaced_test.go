package images_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// A rebuild that moves a tag drops the image it replaced, unless that image is still named by
// another tag or used by a container.
func TestRebuildDropsTheReplacedImage(t *testing.T) {
	dockertest.Require(t)
	ctx := context.Background()
	tag := "maf-sandbox-test/replaced-" + dockertest.Session() + ":local"
	var built []string
	t.Cleanup(func() { // after the container's removal below: cleanups run last first
		for _, id := range built {
			_, _, _ = dockertest.DockerErr(context.Background(), "image", "rm", "-f", id)
		}
	})
	build := func(content string) string {
		t.Helper()
		dir := t.TempDir()
		recipe := "FROM scratch\nCOPY f /f\nLABEL " + images.LabelTestImage + "=replaced\n"
		for k, v := range dockertest.Labels() {
			recipe += "LABEL " + k + "=" + v + "\n"
		}
		for name, body := range map[string]string{"Dockerfile": recipe, "f": content} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		id, err := images.Rebuild(ctx, "docker", tag, dir)
		if err != nil || id == "" {
			t.Fatalf("built %s: %q, %v", tag, id, err)
		}
		built = append(built, id)
		return id
	}
	exists := func(id string) bool {
		_, _, err := dockertest.DockerErr(ctx, "image", "inspect", id)
		return err == nil
	}
	first := build("one")
	second := build("two")
	if exists(first) {
		t.Errorf("the replaced image %s is still there", first)
	}
	// Named by another tag: kept.
	keep := tag + "-kept"
	dockertest.Docker(t, "tag", second, keep)
	t.Cleanup(func() { _, _, _ = dockertest.DockerErr(context.Background(), "image", "rm", keep) })
	third := build("three")
	if !exists(second) {
		t.Errorf("the replaced image %s, still tagged %s, was removed", second, keep)
	}
	// Used by a container: kept.
	c := dockertest.Docker(t, append(append([]string{"create"}, dockertest.LabelArgs()...), third, "/f")...)
	t.Cleanup(func() { _, _, _ = dockertest.DockerErr(context.Background(), "rm", "-f", c) })
	build("four")
	if !exists(third) {
		t.Errorf("the replaced image %s, used by a container, was removed", third)
	}
}
