package dockertest

import (
	"fmt"
	"testing"
)

func TestRunContainer(t *testing.T) {
	image := Busybox(t)
	var id string
	t.Run("run", func(t *testing.T) {
		id = RunContainer(t, image, "--user", "sandbox")
		if got := Docker(t, "inspect", "--format", "{{.State.Running}}", id); got != "true" {
			t.Fatalf("container running = %s, want true", got)
		}
		for k, v := range Labels() {
			got := Docker(t, "inspect", "--format", fmt.Sprintf("{{index .Config.Labels %q}}", k), id)
			if got != v {
				t.Errorf("label %s = %q, want %q", k, got, v)
			}
		}
		if got := Docker(t, "exec", id, "id", "-un"); got != "sandbox" {
			t.Errorf("extra args not applied: user = %q, want sandbox", got)
		}
	})
	if id == "" {
		return // the subtest failed already
	}
	if got := Docker(t, "ps", "--all", "--quiet", "--filter", "id="+id); got != "" {
		t.Fatalf("container %s outlived its test", id)
	}
}

// A container that is created but fails to start is removed all the same: the cleanup is
// registered before the error is checked.
func TestRunContainerFailedStart(t *testing.T) {
	image := Busybox(t)
	mark := "maf-sandbox-test.case=failed-start-" + Process()
	t.Run("run", func(t *testing.T) {
		r := &recorder{TB: t}
		r.run(func(tb testing.TB) { RunContainer(tb, image, "--label", mark, "--entrypoint", "/nonexistent") })
		if r.outcome != "fatal" {
			t.Fatalf("RunContainer with a bad entrypoint: outcome %q, want fatal", r.outcome)
		}
		if got := Docker(t, "ps", "--all", "--quiet", "--filter", "label="+mark); got == "" {
			t.Fatal("no container was created, so this case proves nothing")
		}
	})
	if got := Docker(t, "ps", "--all", "--quiet", "--filter", "label="+mark); got != "" {
		t.Fatalf("container %s of a failed start outlived its test", got)
	}
}
