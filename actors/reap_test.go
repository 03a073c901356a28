package actors

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// inventoryEngine is an engine seam that can also take an inventory; only the inventory is
// used. gate, when set, holds every listing until it is closed.
type inventoryEngine struct {
	docker.Driver
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

func TestBackendReap(t *testing.T) {
	cases := []struct {
		name    string
		engine  docker.Driver
		age     time.Duration
		wantErr error
	}{
		{"reaps through the engine's inventory", &inventoryEngine{}, time.Hour, nil},
		{"an invalid age is the reaper's refusal", &inventoryEngine{}, 0, reaper.ErrInvalid},
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

// proxyEngine holds one old orphan proxy and answers the reaper's inventory, the drain's
// inspect, stop and log read, and the removal, recording every ID each step addressed.
type proxyEngine struct {
	docker.Driver
	mu       sync.Mutex
	proxy    docker.Resource
	gone     bool
	refuseRm bool
	steps    []string
}

func (e *proxyEngine) step(s string) {
	e.mu.Lock()
	e.steps = append(e.steps, s)
	e.mu.Unlock()
}

func (e *proxyEngine) ListContainerIDs(context.Context, map[string]string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return nil, nil
	}
	return []string{e.proxy.ID}, nil
}

func (e *proxyEngine) ListNetworkIDs(context.Context, map[string]string) ([]string, error) {
	return nil, nil
}

func (e *proxyEngine) InspectContainerID(_ context.Context, id string) (docker.Resource, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone || id != e.proxy.ID {
		return docker.Resource{}, docker.ErrNotFound
	}
	return e.proxy, nil
}

func (e *proxyEngine) InspectNetworkID(context.Context, string) (docker.Resource, error) {
	return docker.Resource{}, docker.ErrNotFound
}

func (e *proxyEngine) Inspect(_ context.Context, ref string) (docker.ContainerInfo, error) {
	e.step("inspect " + ref)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone || ref != e.proxy.ID {
		return docker.ContainerInfo{}, docker.ErrNotFound
	}
	return docker.ContainerInfo{ID: e.proxy.ID, Name: e.proxy.Name, Labels: e.proxy.Labels}, nil
}

func (e *proxyEngine) ProxyStop(_ context.Context, id string, _ time.Duration) error {
	e.step("stop " + id)
	return nil
}

func (e *proxyEngine) ProxyLogs(_ context.Context, id string, _, _ int) ([]byte, error) {
	e.step("logs " + id)
	return []byte("2026-05-01T12:00:00.000000000Z DENY evil.example:443\n"), nil
}

func (e *proxyEngine) RemoveContainerID(_ context.Context, id string) (docker.RemoveOutcome, error) {
	e.step("rm " + id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuseRm {
		return 0, &docker.CommandError{Args: []string{"rm", "-f", id}, ExitCode: 1, Stderr: []byte("refused")}
	}
	e.gone = true
	return docker.Removed, nil
}

func (e *proxyEngine) RemoveNetworkID(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

type recordingSink struct {
	sandbox.NopObserver
	mu      sync.Mutex
	windows []sandbox.EgressWindow
}

func (s *recordingSink) EgressObserved(_ context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	s.windows = append(s.windows, w)
	s.mu.Unlock()
}

// Reap drains each proxy with stop, logs and rm on the same inspected ID, and publishes its
// window once across a refused-then-successful retry, under the key the proxy's label carries.
func TestBackendReapDrainsProxies(t *testing.T) {
	key := sandbox.Key{Scope: "tenant-1", ThreadID: "t", AgentID: "a"}
	enc, ok := label.EncodeKey(key)
	if !ok {
		t.Fatal("encode key label")
	}
	id := strings.Repeat("c", 64)
	e := &proxyEngine{refuseRm: true, proxy: docker.Resource{ID: id, Name: "maf-sandbox-docker-0123456789ab-proxy",
		Created: time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339Nano),
		Labels: map[string]string{label.Scope: "tenant-1", label.Thread: "t", label.Agent: "a", label.Kind: "k",
			label.Role: label.RoleProxy, label.KeyV1: enc}}}
	sink := &recordingSink{}
	b, err := NewBackend(docker.Config{}, WithEngine(e), WithoutEventWatch(), WithObserver(sink))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })

	res, err := b.Reap(context.Background(), 24*time.Hour)
	if err != nil || len(res.Failures) != 1 || res.ProxiesRemoved != 0 {
		t.Fatalf("refused sweep %+v %v", res, err)
	}
	if len(sink.windows) != 0 {
		t.Fatalf("published %d windows after a refused removal", len(sink.windows))
	}
	e.mu.Lock()
	e.refuseRm = false
	e.mu.Unlock()
	res, err = b.Reap(context.Background(), 24*time.Hour)
	if err != nil || len(res.Failures) != 0 || res.ProxiesRemoved != 1 {
		t.Fatalf("retry %+v %v", res, err)
	}
	if len(sink.windows) != 1 {
		t.Fatalf("published %d windows, want 1", len(sink.windows))
	}
	w := sink.windows[0]
	if w.ProxyID != id || w.Key != key || w.Trigger != "reap" || len(w.Decisions) != 1 || w.Decisions[0].Host != "evil.example" {
		t.Fatalf("window %+v", w)
	}
	for _, s := range e.steps {
		if !strings.HasSuffix(s, " "+id) {
			t.Fatalf("step %q did not address the inspected ID", s)
		}
	}
	want := []string{"inspect", "stop", "logs", "rm", "inspect", "stop", "logs", "rm"}
	if len(e.steps) != len(want) {
		t.Fatalf("steps %v", e.steps)
	}
	for i, s := range e.steps {
		if !strings.HasPrefix(s, want[i]+" ") {
			t.Fatalf("steps %v, want %v", e.steps, want)
		}
	}
}
