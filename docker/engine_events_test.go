package docker_test

import (
	"context"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

func TestEngineEvents(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	key := testKey(t)
	streamCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := e.Events(streamCtx, docker.EventFilter{
		Labels:  map[string]string{label.Thread: label.Value(key.ThreadID)},
		Actions: []string{"start", "die"},
	})
	if err != nil {
		t.Fatal(err)
	}
	name, id := workload(t, e, image, key, docker.WithCmd("true"))
	seen := map[string]bool{}
	timeout := time.After(30 * time.Second)
	for !seen["start"] || !seen["die"] {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream closed early")
			}
			if ev.Err != nil {
				t.Fatalf("stream ended: %v", ev.Err)
			}
			if ev.ID != id || ev.Name != name {
				t.Fatalf("event for %s (%s), want %s", ev.Name, ev.ID, name)
			}
			seen[ev.Action] = true
		case <-timeout:
			t.Fatalf("saw %v, want start and die", seen)
		}
	}
	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Err != nil {
				t.Fatalf("a cancelled stream reported %v", ev.Err)
			}
		case <-deadline:
			t.Fatal("the stream did not close after cancel")
		}
	}
}
