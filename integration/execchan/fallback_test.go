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

// TestExecChannelServesANonRootImage: an image whose user is not root runs the supervisor as
// that user, which could not make its socket's directory in a root it does not own; the engine
// makes the directory at create (that user's, mode 0700), so its commands take the channel,
// as that user.
func TestExecChannelServesANonRootImage(t *testing.T) {
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
		r := run(t, sb, sandbox.Shell("id -u; stat -c '%u %g %a' "+execwire.SocketDir))
		if string(r.StdoutBytes) != "1234\n1234 1234 700\n" {
			t.Fatalf("id -u, the socket's directory: %q", r.StdoutBytes)
		}
		onChannel(t, eng)
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
