package reaper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// t0 is the fake clock's now.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func clock() Option { return withClock(func() time.Time { return t0 }) }

// ago renders a creation time d before t0 in the engine's format.
func ago(d time.Duration) string { return t0.Add(-d).Format(time.RFC3339Nano) }

// fakeID is a deterministic 64-hex ID.
func fakeID(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}

// call is one inventory call the fake saw.
type call struct {
	Op string // list-containers, list-networks, inspect-container, inspect-network, rm-container, rm-network
	ID string
}

// fakeInventory is an engine with containers and networks held in maps. hook, when set, runs
// first on every call: it may change the state and return an error to answer with.
type fakeInventory struct {
	mu         sync.Mutex
	containers map[string]docker.Resource
	networks   map[string]docker.Resource
	calls      []call
	hook       func(f *fakeInventory, c call) error
	// silentAbsent makes a removal of these IDs answer Absent even though they exist (rm -f's
	// exit 0 without an echo), without removing them.
	silentAbsent map[string]bool
}

func newFake() *fakeInventory {
	return &fakeInventory{containers: map[string]docker.Resource{}, networks: map[string]docker.Resource{}, silentAbsent: map[string]bool{}}
}

// identity returns the four identity labels for scope s.
func identity(scope string) map[string]string {
	return map[string]string{
		label.Scope:  label.Value(scope),
		label.Thread: "t-1",
		label.Agent:  "agent",
		label.Kind:   "default",
	}
}

func withLabel(l map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range l {
		out[a] = b
	}
	if v == "\x00delete" {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// base returns the derived base name numbered n.
func base(n int) string { return fmt.Sprintf("%s%012x", docker.NamePrefix, n) }

func (f *fakeInventory) addWorkload(name, created, seed string, labels map[string]string) string {
	id := fakeID(seed)
	f.containers[id] = docker.Resource{ID: id, Name: name, Labels: labels, Created: created}
	return id
}

func (f *fakeInventory) addProxy(name, created, seed string, labels map[string]string) string {
	id := fakeID(seed)
	f.containers[id] = docker.Resource{ID: id, Name: name, Labels: withLabel(labels, label.Role, label.RoleProxy), Created: created}
	return id
}

func (f *fakeInventory) addNetwork(name, created, seed string, labels map[string]string) string {
	id := fakeID(seed)
	f.networks[id] = docker.Resource{ID: id, Name: name, Labels: labels, Created: created}
	return id
}

// topology adds workload, proxy and network of base b with the given ages.
func (f *fakeInventory) topology(b string, scope string, work, proxy, net time.Duration) (w, p, n string) {
	l := identity(scope)
	if work >= 0 {
		w = f.addWorkload(b, ago(work), b+"w", l)
	}
	if proxy >= 0 {
		p = f.addProxy(b+docker.ProxySuffix, ago(proxy), b+"p", l)
	}
	if net >= 0 {
		n = f.addNetwork(b+docker.NetworkSuffix, ago(net), b+"n", l)
	}
	return
}

func (f *fakeInventory) record(ctx context.Context, op, id string) error {
	f.mu.Lock()
	c := call{Op: op, ID: id}
	f.calls = append(f.calls, c)
	hook := f.hook
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if hook != nil {
		return hook(f, c)
	}
	return nil
}

func matches(labels, filter map[string]string) bool {
	for k, v := range filter {
		got, ok := labels[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

func (f *fakeInventory) list(ctx context.Context, op string, m map[string]docker.Resource, filter map[string]string) ([]string, error) {
	if err := f.record(ctx, op, ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, r := range m {
		if matches(r.Labels, filter) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (f *fakeInventory) ListContainerIDs(ctx context.Context, filter map[string]string) ([]string, error) {
	return f.list(ctx, "list-containers", f.containers, filter)
}

func (f *fakeInventory) ListNetworkIDs(ctx context.Context, filter map[string]string) ([]string, error) {
	return f.list(ctx, "list-networks", f.networks, filter)
}

func (f *fakeInventory) inspect(ctx context.Context, op string, m map[string]docker.Resource, id string) (docker.Resource, error) {
	if err := f.record(ctx, op, id); err != nil {
		return docker.Resource{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := m[id]
	if !ok {
		return docker.Resource{}, fmt.Errorf("inspect %s: %w", id, docker.ErrNotFound)
	}
	return r, nil
}

func (f *fakeInventory) InspectContainerID(ctx context.Context, id string) (docker.Resource, error) {
	return f.inspect(ctx, "inspect-container", f.containers, id)
}

func (f *fakeInventory) InspectNetworkID(ctx context.Context, id string) (docker.Resource, error) {
	return f.inspect(ctx, "inspect-network", f.networks, id)
}

func (f *fakeInventory) remove(ctx context.Context, op string, m map[string]docker.Resource, id string) (docker.RemoveOutcome, error) {
	if err := f.record(ctx, op, id); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.silentAbsent[id] {
		return docker.Absent, nil
	}
	if _, ok := m[id]; !ok {
		return docker.Absent, nil
	}
	delete(m, id)
	return docker.Removed, nil
}

func (f *fakeInventory) RemoveContainerID(ctx context.Context, id string) (docker.RemoveOutcome, error) {
	return f.remove(ctx, "rm-container", f.containers, id)
}

func (f *fakeInventory) RemoveNetworkID(ctx context.Context, id string) (docker.RemoveOutcome, error) {
	return f.remove(ctx, "rm-network", f.networks, id)
}

// removals returns the IDs of every removal call in order.
func (f *fakeInventory) removals() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.Op == "rm-container" || c.Op == "rm-network" {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeInventory) exists(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, c := f.containers[id]
	_, n := f.networks[id]
	return c || n
}

// counts is (Disposed, ProxiesRemoved, NetworksRemoved).
type counts struct{ W, P, N int }

func countsOf(r sandbox.ReapResult) counts {
	return counts{r.Disposed, r.ProxiesRemoved, r.NetworksRemoved}
}

// fakeDrainer records every drain and every publication.
type fakeDrainer struct {
	mu        sync.Mutex
	drained   []string
	published []string
}

func (d *fakeDrainer) Drain(_ context.Context, proxy docker.Resource) Publication {
	d.mu.Lock()
	d.drained = append(d.drained, proxy.ID)
	d.mu.Unlock()
	return func(_ context.Context, removal docker.RemoveOutcome) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.published = append(d.published, proxy.ID+" "+removal.String())
	}
}
