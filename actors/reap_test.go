package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// inventoryEngine is an engine seam that can also take an inventory; only the inventory is
// used. gate, when set, holds every listing until it is closed.
type inventoryEngine struct {
	docker.Engine
	mu     sync.Mutex
	lists  int
	gate   chan struct{}
	listed chan struct{}
}

func (e *inventoryEngine) ListContainerIDs(ctx context.Context, _ map[string]string) ([]string, error) {
	e.mu.Lock()
	e.lists++
	e.mu.Unlock()
	if e.gate != nil {
		e.listed <- struct{}{}
		<-e.gate
	}
	return nil, nil
}

func (e *inventoryEngine) ListNetworkIDs(context.Context, map[string]string) ([]string, error) {
	return nil, nil
}

func (e *inventoryEngine) InspectContainerID(context.Context, string) (docker.Resource, error) {
	return docker.Resource{}, docker.ErrNotFound
}

func (e *inventoryEngine) InspectNetworkID(context.Context, string) (docker.Resource, error) {
	return docker.Resource{}, docker.ErrNotFound
}

func (e *inventoryEngine) RemoveContainerID(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

func (e *inventoryEngine) RemoveNetworkID(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

// plainEngine is an engine seam without an inventory.
type plainEngine struct{ docker.Engine }

func TestBackendReap(t *testing.T) {
	cases := []struct {
		name    string
		engine  docker.Engine
		age     time.Duration
		wantErr error
	}{
		{"reaps through the engine's inventory", &inventoryEngine{}, time.Hour, nil},
		{"an invalid age is the reaper's refusal", &inventoryEngine{}, 0, reaper.ErrInvalid},
		{"an engine without an inventory is unsupported", plainEngine{}, time.Hour, sandbox.ErrUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBackend(docker.Config{}, WithEngine(tc.engine), WithoutEventWatch())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close(context.Background()) })
			res, err := b.Reap(context.Background(), tc.age, reaper.WithScope("s"))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err == nil && (res.Scope != "s" || len(res.Failures) != 0) {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

func TestBackendReapInProgress(t *testing.T) {
	e := &inventoryEngine{gate: make(chan struct{}), listed: make(chan struct{}, 1)}
	b, err := NewBackend(docker.Config{}, WithEngine(e), WithoutEventWatch())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	done := make(chan error, 1)
	go func() {
		_, err := b.Reap(context.Background(), time.Hour)
		done <- err
	}()
	<-e.listed
	if _, err := b.Reap(context.Background(), time.Hour); !errors.Is(err, ErrReapInProgress) {
		t.Fatalf("second reap: %v, want ErrReapInProgress", err)
	}
	close(e.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.gate = nil
	if _, err := b.Reap(context.Background(), time.Hour); err != nil {
		t.Fatalf("after the first finished: %v", err)
	}
}
