package hostfs

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// containerRoot runs a busybox container (removed with the test) and attaches a Root to its
// init process.
func containerRoot(tb testing.TB, extraArgs ...string) (*Root, string) {
	tb.Helper()
	dockertest.RequireRoot(tb)
	id := dockertest.RunContainer(tb, dockertest.Busybox(tb), extraArgs...)
	return attachTo(tb, id), id
}

// attachTo proves container id's init process as the engine does, the daemon asked through
// the CLI, and returns its Root (closed with the test).
func attachTo(tb testing.TB, id string) *Root {
	tb.Helper()
	inspect := func(context.Context) (Instance, error) {
		out := strings.Fields(dockertest.Docker(tb, "inspect", "--format", "{{.Id}} {{.State.Running}} {{.State.Pid}} {{.State.StartedAt}}", id))
		pid, _ := strconv.Atoi(out[2])
		started, _ := time.Parse(time.RFC3339Nano, out[3])
		return Instance{ID: out[0], Running: out[1] == "true", Pid: pid, StartedAt: started}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, _ := inspect(ctx)
	r, err := Attach(ctx, want, inspect)
	if err != nil {
		tb.Fatalf("attach to %s: %v", id, err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r
}
