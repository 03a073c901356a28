package images_test

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
)

// TestPythonImage builds (or finds) the Python image and checks, in a container, what
// host-tools programs rely on: python3 with json, and the launcher's commands.
func TestPythonImage(t *testing.T) {
	image := dockertest.Python(t)
	id := dockertest.RunContainer(t, image)
	cases := []struct{ name, cmd, want string }{
		{"python3 with json", `python3 -c 'import json,sys; print(json.dumps(sys.version_info[0]))'`, "3"},
		{"the launcher's commands", "for c in sh nohup setsid printf mv mkdir rm kill sleep; do command -v $c >/dev/null || echo missing $c; done", ""},
		{"root", "id -u", "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := dockertest.Docker(t, "exec", id, "sh", "-c", tc.cmd); got != tc.want {
				t.Fatalf("%s: got %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
	labels := dockertest.Docker(t, "image", "inspect", "--format", `{{index .Config.Labels "`+images.LabelTestImage+`"}}`, image)
	if labels != "python" {
		t.Fatalf("label %s = %q, want python", images.LabelTestImage, labels)
	}
	// The image is current, so a second ensure builds nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := images.EnsurePython(ctx, "docker", image); err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("EnsurePython again: %v after %s", err, time.Since(start))
	}
}
