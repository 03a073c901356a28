package execchan

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/sandbox"
)

// TestExecChannelFallsBackWhereTheSupervisorCannotListen: an image whose user may not write
// the root directory runs the supervisor as that user; it cannot make its socket's directory,
// keeps the container alive all the same, and every command takes docker exec, as that user.
func TestExecChannelFallsBackWhereTheSupervisorCannotListen(t *testing.T) {
	image := itest.DerivedImage(t, "mkdir -p /home/u && chown 1234:1234 /home/u", "USER 1234:1234")
	b, eng := itest.NewCountingBackend(t, actors.WithExecChannel(itest.ExecSupervisor(t)))
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec))
	if err != nil {
		t.Fatal(err)
	}
	sb := itest.Acquire(t, b, itest.NewKey(t), spec).(*actors.Sandbox)
	if got := dockertest.Docker(t, "inspect", "--format", "{{.Path}}", sb.ContainerName()); strings.TrimSpace(got) != execwire.Binary {
		t.Fatalf("the sandbox's first process is %q, not the supervisor", got)
	}
	for range 2 {
		eng.Reset()
		r := run(t, sb, sandbox.Argv("id", "-u"))
		if strings.TrimSpace(string(r.StdoutBytes)) != "1234" {
			t.Fatalf("id -u: %q", r.StdoutBytes)
		}
		onDockerExec(t, eng)
	}
}

// TestExecChannelKeepsAnImagesEntrypoint: an image with an entrypoint of its own keeps it (the
// supervisor would replace what the container runs), and its commands take docker exec.
func TestExecChannelKeepsAnImagesEntrypoint(t *testing.T) {
	image := itest.DerivedImage(t, "true", `ENTRYPOINT ["/bin/sh", "-c", "exec \"$@\"", "entry"]`)
	b, eng := itest.NewCountingBackend(t, actors.WithExecChannel(itest.ExecSupervisor(t)))
	spec, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec))
	if err != nil {
		t.Fatal(err)
	}
	sb := itest.Acquire(t, b, itest.NewKey(t), spec).(*actors.Sandbox)
	if got := dockertest.Docker(t, "inspect", "--format", "{{.Path}}", sb.ContainerName()); strings.TrimSpace(got) != "/bin/sh" {
		t.Fatalf("the sandbox's first process is %q, not the image's entrypoint", got)
	}
	eng.Reset()
	run(t, sb, sandbox.Argv("true"))
	onDockerExec(t, eng)
}
