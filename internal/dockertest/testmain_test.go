package dockertest

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestSweep(t *testing.T) {
	image := Busybox(t)
	name := "maf-sandbox-test-sweep-" + Process()
	foreign := name + "-foreign"
	// Backstops in case the sweep misses; both are no-ops once it has worked.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, _, _ = DockerErr(ctx, "rm", "--force", name, foreign)
		_, _, _ = DockerErr(ctx, "network", "rm", name)
	})

	Docker(t, append(append([]string{"network", "create", "--internal"}, LabelArgs()...), name)...)
	Docker(t, append(append([]string{"create", "--name", name, "--network", name}, LabelArgs()...), image, "sleep", "3600")...)
	// Same session, another test binary: still in use by that package, so not ours to sweep.
	Docker(t, "create", "--name", foreign,
		"--label", LabelSession+"="+Session(), "--label", LabelProcess+"=another", image, "sleep", "3600")

	var report bytes.Buffer
	sweep(&report)

	for _, want := range []string{"leaked 1 container(s)", "leaked 1 network(s)"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("sweep report %q lacks %q", report.String(), want)
		}
	}
	if got := Docker(t, "ps", "--all", "--quiet", "--filter", "name=^"+name+"$"); got != "" {
		t.Errorf("container %s survived the sweep", name)
	}
	if got := Docker(t, "network", "ls", "--quiet", "--filter", "name=^"+name+"$"); got != "" {
		t.Errorf("network %s survived the sweep", name)
	}
	if got := Docker(t, "ps", "--all", "--quiet", "--filter", "name=^"+foreign+"$"); got == "" {
		t.Errorf("the sweep removed %s, which another process's label protects", foreign)
	}
}
