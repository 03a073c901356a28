package dockertest

import (
	"context"
	"testing"
)

// TestRemoveNetworkDisconnectsItsEndpoints: a network a running container is still attached
// to is refused by a plain network rm ("active endpoints"); RemoveNetwork disconnects the
// endpoint by force and removes it, and a network already gone is no error.
func TestRemoveNetworkDisconnectsItsEndpoints(t *testing.T) {
	image := Busybox(t)
	name := "maf-sandbox-test-rmnet-" + Process()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, _, _ = DockerErr(ctx, "rm", "--force", name)
		_, _, _ = DockerErr(ctx, "network", "rm", name)
	})
	Docker(t, append(append([]string{"network", "create", "--internal"}, LabelArgs()...), name)...)
	Docker(t, append(append([]string{"run", "--detach", "--name", name, "--network", name}, LabelArgs()...), image, "sleep", "3600")...)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, _, err := DockerErr(ctx, "network", "rm", name); err == nil {
		t.Fatal("network rm removed a network with a running container attached: the case under test did not arise")
	}
	if err := RemoveNetwork(ctx, name); err != nil {
		t.Fatal(err)
	}
	if got := Docker(t, "network", "ls", "--quiet", "--filter", "name=^"+name+"$"); got != "" {
		t.Fatalf("network %s is still there", name)
	}
	if got := Docker(t, "inspect", "--format", "{{.State.Running}}", name); got != "true" {
		t.Errorf("the container was not left running (%s): only its endpoint was to go", got)
	}
	if err := RemoveNetwork(ctx, name); err != nil {
		t.Errorf("a network already gone: %v", err)
	}
}
