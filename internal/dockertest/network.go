package dockertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// RemoveNetwork removes a network a test created; one already gone is success. A network
// the daemon still counts endpoints on is the case it exists for: an endpoint can outlive
// its container for a moment after a removal, and dockerd 20.10 has been seen keeping one
// for good after a test run (moby/moby#17217). So on "active endpoints" it disconnects every
// endpoint the network lists by force, by name (the only handle a stale endpoint answers
// to), and tries again, a few times within ctx.
func RemoveNetwork(ctx context.Context, name string) error {
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("remove network %s: %w (last: %v)", name, ctx.Err(), last)
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		_, stderr, err := DockerErr(ctx, "network", "rm", name)
		switch {
		case err == nil, isNoSuchNetwork(stderr):
			return nil
		case !strings.Contains(string(stderr), "active endpoints"):
			return fmt.Errorf("remove network %s: %w: %s", name, err, strings.TrimSpace(string(stderr)))
		}
		last = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(stderr)))
		out, _, err := DockerErr(ctx, "network", "inspect", "--format",
			`{{range $id, $c := .Containers}}{{if $c.Name}}{{$c.Name}}{{else}}{{$id}}{{end}}{{"\n"}}{{end}}`, name)
		if err != nil {
			continue
		}
		for _, ep := range strings.Fields(string(out)) {
			_, _, _ = DockerErr(ctx, "network", "disconnect", "--force", name, ep)
		}
	}
	return fmt.Errorf("remove network %s: still has endpoints after forced disconnects: %v", name, last)
}

func isNoSuchNetwork(stderr []byte) bool {
	s := string(stderr)
	return strings.Contains(s, "No such network") || strings.Contains(s, "not found")
}

// CleanupNetwork registers name's removal ([RemoveNetwork]) to run when t ends, and fails t
// when the network cannot go. Register it before creating the network, and before any
// container on it, so that it runs after their removals (cleanups run last-in, first-out).
func CleanupNetwork(t testing.TB, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := RemoveNetwork(ctx, name); err != nil {
			t.Errorf("%v", err)
		}
	})
}
