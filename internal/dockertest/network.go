package dockertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// ErrEndpointCountDrift is what [RemoveNetwork] returns, wrapped, for a network the daemon
// refuses to remove for "active endpoints" while it lists none: dockerd's own count of the
// network's endpoints has drifted from its endpoints (seen with dockerd 20.10 after tests
// that kill engines mid-dispose: the count stayed at 2 in its store with no endpoint
// recorded). No client call frees such a network; a daemon restart does.
var ErrEndpointCountDrift = errors.New("the daemon counts endpoints on the network but lists none")

// RemoveNetwork removes a network a test created; one already gone is success. A network
// the daemon still counts endpoints on is the case it exists for: an endpoint can outlive
// its container for a moment after a removal, and one dockerd keeps for good answers only to
// a forced disconnect by name (moby/moby#17217). So on "active endpoints" it disconnects
// every endpoint the network lists, by force, and tries again, a few times within ctx. When
// the network still cannot go and lists no endpoint, the error wraps [ErrEndpointCountDrift].
func RemoveNetwork(ctx context.Context, name string) error {
	var last error
	listed := -1 // endpoints the network listed at the last look
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
		last = err
		out, _, err := DockerErr(ctx, "network", "inspect", "--format",
			`{{range $id, $c := .Containers}}{{if $c.Name}}{{$c.Name}}{{else}}{{$id}}{{end}}{{"\n"}}{{end}}`, name)
		if err != nil {
			continue
		}
		eps := strings.Fields(string(out))
		listed = len(eps)
		for _, ep := range eps {
			_, _, _ = DockerErr(ctx, "network", "disconnect", "--force", name, ep)
		}
	}
	if listed == 0 {
		return fmt.Errorf("remove network %s: %w (%v)", name, ErrEndpointCountDrift, last)
	}
	return fmt.Errorf("remove network %s: still has endpoints after forced disconnects: %v", name, last)
}

func isNoSuchNetwork(stderr []byte) bool {
	s := string(stderr)
	return strings.Contains(s, "No such network") || strings.Contains(s, "not found")
}

// CleanupNetwork registers name's removal ([RemoveNetwork]) to run when t ends, and fails t
// when the network cannot go, but for the daemon's own drift ([ErrEndpointCountDrift]),
// which it logs: nothing of the test's is attached to such a network, and nothing a test can
// do removes it. Register it before creating the network, and before any container on it, so
// that it runs after their removals (cleanups run last-in, first-out).
func CleanupNetwork(t testing.TB, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		switch err := RemoveNetwork(ctx, name); {
		case errors.Is(err, ErrEndpointCountDrift):
			t.Logf("left on the daemon: %v", err)
		case err != nil:
			t.Errorf("%v", err)
		}
	})
}
