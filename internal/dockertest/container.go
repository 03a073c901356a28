package dockertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RunContainer starts a detached container of image running "sleep 3600", labelled with
// [Labels], and returns its ID. extraArgs are docker run flags placed before the image
// (--user, --network, more --label ...).
//
// The container's removal (docker rm --force --volumes) is registered with t.Cleanup before
// the run is attempted, so a container created but not started is removed too. It calls
// t.Fatal when the run fails, and t.Error when the removal does.
func RunContainer(t testing.TB, image string, extraArgs ...string) (id string) {
	t.Helper()
	return RunContainerCmd(t, image, []string{"sleep", "3600"}, extraArgs...)
}

// RunContainerCmd is [RunContainer] with the container's command given (the image's
// entrypoint, if any, receives it as arguments).
func RunContainerCmd(t testing.TB, image string, cmd []string, extraArgs ...string) (id string) {
	t.Helper()
	// docker writes the ID here as soon as it has created the container, before starting it.
	cidfile := filepath.Join(t.TempDir(), "cid")
	t.Cleanup(func() {
		target := id
		if b, err := os.ReadFile(cidfile); err == nil && len(b) > 0 {
			target = strings.TrimSpace(string(b))
		}
		if target == "" {
			return // nothing was created
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if _, _, err := DockerErr(ctx, "rm", "--force", "--volumes", target); err != nil {
			t.Errorf("remove container: %v", err)
		}
	})

	// --pull never: no registry is reachable, and a mistyped image must fail here rather
	// than send the daemon looking for one.
	args := append([]string{"run", "--detach", "--pull", "never", "--cidfile", cidfile}, LabelArgs()...)
	args = append(args, extraArgs...)
	args = append(append(args, image), cmd...)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, _, err := DockerErr(ctx, args...)
	id = strings.TrimSpace(string(out))
	if err != nil {
		t.Fatalf("run container: %v", err)
	}
	return id
}
