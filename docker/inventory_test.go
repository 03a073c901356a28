package docker

import (
	"context"
	"errors"
	"strings"
	"testing"
)

const invID1 = "1111111111111111111111111111111111111111111111111111111111111111"

// TestInventoryRefusesNonIDs: the inventory addresses resources by their full ID only, and
// refuses anything else before it binds or calls the daemon.
func TestInventoryRefusesNonIDs(t *testing.T) {
	e, logPath := newFakeAPI(t)
	for _, ref := range []string{"", "maf-sandbox-docker-0123456789ab", invID1[:12], "-f", strings.Repeat("A", 64)} {
		if _, err := e.InspectContainerID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("inspect %q: %v", ref, err)
		}
		if _, err := e.InspectNetworkID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("inspect network %q: %v", ref, err)
		}
		if _, err := e.RemoveNetworkID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("remove network %q: %v", ref, err)
		}
		if _, err := e.RemoveContainerID(context.Background(), ref); !errors.Is(err, ErrInvalid) {
			t.Fatalf("remove container %q: %v", ref, err)
		}
	}
	if log := readLog(t, logPath); len(log) > 1 || log[0] != "" {
		t.Fatalf("engine calls %v", log)
	}
}
