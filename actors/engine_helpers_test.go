package actors

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/mafsandbox/engine/docker"
)

// fakeEngine is an in-memory docker.Driver for the actor's unit tests: containers with a
// flat filesystem of directories, and a log of every call in order. Hooks override one
// method. It proves sequencing and failure handling; the real engine is in integration/....
type fakeEngine struct {
	mu         sync.Mutex
	calls      []string
	containers map[string]*fakeContainer // by name
	os         string
	osErr      error
	version    string // ServerVersion; "" reads 28.2.2

	onExec  func(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error)
	onStat  func(target, p string) (*docker.Entry, error)
	onPause func(target string) error
	onCopy  func() error
	onStart func(target string) error

	streams []chan struct{} // one per open event stream; closed by breakEvents
}

type fakeContainer struct {
	id      string
	name    string
	running bool
	paused  bool
	exited  *int // the exit code once its first process ended
	labels  map[string]string
	dirs    map[string]bool
	spec    docker.CreateSpec // what it was created with
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{containers: map[string]*fakeContainer{}, os: "linux"}
}

func (f *fakeEngine) log(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeEngine) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeEngine) find(target string) *fakeContainer {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.name == target || c.id == target {
			return c
		}
	}
	return nil
}

func (f *fakeEngine) Bind(context.Context) (docker.Binding, error) {
	return docker.Binding{Context: "fake", Endpoint: "fake://"}, nil
}

func (f *fakeEngine) ServerOS(context.Context) (string, error) {
	f.log("version")
	return f.os, f.osErr
}

func (f *fakeEngine) ServerVersion(context.Context) (string, error) {
	f.log("server version")
	if f.version == "" {
		return "28.2.2", f.osErr
	}
	return f.version, f.osErr
}

func (f *fakeEngine) Inspect(_ context.Context, target string) (docker.ContainerInfo, error) {
	f.log("inspect %s", target)
	c := f.find(target)
	if c == nil {
		return docker.ContainerInfo{}, fmt.Errorf("inspect %s: %w", target, docker.ErrNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	info := docker.ContainerInfo{ID: c.id, Name: c.name, Running: c.running, Paused: c.paused, Labels: c.labels,
		Status: map[bool]string{true: "running", false: "created"}[c.running], Created: time.Now()}
	if c.exited != nil {
		info.Status, info.ExitCode = "exited", *c.exited
	}
	return info, nil
}

func (f *fakeEngine) ImageExists(context.Context, string) (bool, error) {
	f.log("image")
	return true, nil
}

func (f *fakeEngine) ImageEntrypoint(context.Context, string) ([]string, bool, error) {
	f.log("image")
	return nil, true, nil
}

func (f *fakeEngine) Run(ctx context.Context, spec docker.CreateSpec) (string, error) {
	id, err := f.Create(ctx, spec)
	if err == nil {
		err = f.Start(ctx, id)
	}
	return id, err
}

func (f *fakeEngine) Create(_ context.Context, spec docker.CreateSpec) (string, error) {
	f.log("create %s", spec.Name)
	if f.find(spec.Name) != nil {
		return "", fmt.Errorf("create: %w", docker.ErrConflict)
	}
	labels := map[string]string{}
	for _, l := range spec.Labels {
		labels[l.Key] = l.Value
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("%064d", len(f.containers)+1)
	f.containers[spec.Name] = &fakeContainer{id: id, name: spec.Name, labels: labels, dirs: map[string]bool{"/": true}, spec: spec}
	return id, nil
}

func (f *fakeEngine) Start(_ context.Context, target string) error {
	f.log("start %s", short(target))
	if f.onStart != nil {
		if err := f.onStart(target); err != nil {
			return err
		}
	}
	c := f.find(target)
	if c == nil {
		return docker.ErrNotFound
	}
	f.mu.Lock()
	c.running = true
	f.mu.Unlock()
	return nil
}

func (f *fakeEngine) Rename(_ context.Context, target, newName string) error {
	f.log("rename %s %s", short(target), newName)
	c := f.find(target)
	if c == nil {
		return docker.ErrNotFound
	}
	if f.find(newName) != nil {
		return fmt.Errorf("rename: %w", docker.ErrConflict)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, c.name)
	c.name = newName
	f.containers[newName] = c
	return nil
}

func (f *fakeEngine) Remove(_ context.Context, target string) (docker.RemoveOutcome, error) {
	f.log("rm %s", short(target))
	c := f.find(target)
	if c == nil {
		return docker.Absent, nil
	}
	f.mu.Lock()
	delete(f.containers, c.name)
	f.mu.Unlock()
	return docker.Removed, nil
}

func (f *fakeEngine) Pause(_ context.Context, target string) error {
	f.log("pause")
	if f.onPause != nil {
		if err := f.onPause(target); err != nil {
			return err
		}
	}
	c := f.find(target)
	if c == nil {
		return docker.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.paused {
		return docker.ErrPaused
	}
	c.paused = true
	return nil
}

func (f *fakeEngine) Unpause(_ context.Context, target string) error {
	f.log("unpause")
	if c := f.find(target); c != nil {
		f.mu.Lock()
		c.paused = false
		f.mu.Unlock()
	}
	return nil
}

func (f *fakeEngine) Exec(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
	f.log("exec %s", strings.Join(req.Argv, " "))
	if f.onExec != nil {
		return f.onExec(ctx, req)
	}
	return docker.ExecOutput{}, nil
}

func (f *fakeEngine) Stat(_ context.Context, target, p string) (*docker.Entry, error) {
	f.log("stat %s", p)
	if f.onStat != nil {
		return f.onStat(target, p)
	}
	c := f.find(target)
	if c == nil {
		return nil, docker.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.dirs[p] {
		return &docker.Entry{Name: path.Base(p), Type: docker.EntryDir, Mode: 0o755}, nil
	}
	return nil, nil
}

func (f *fakeEngine) Read(_ context.Context, _, p string, _ int64) (*docker.Entry, []byte, error) {
	f.log("read %s", p)
	return nil, nil, docker.ErrPathAbsent
}

func (f *fakeEngine) CopyIn(_ context.Context, target string, _ []byte) error {
	f.log("cp-in")
	if f.onCopy != nil {
		if err := f.onCopy(); err != nil {
			return err
		}
	}
	c := f.find(target)
	if c == nil {
		return docker.ErrNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range []string{"/maf-sandbox", "/maf-sandbox/work"} {
		c.dirs[d] = true
	}
	return nil
}

func (f *fakeEngine) ListNames(context.Context, map[string]string, string) ([]string, error) {
	f.log("ps")
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.containers {
		names = append(names, n)
	}
	return names, nil
}

func (f *fakeEngine) Events(ctx context.Context, _ docker.EventFilter) (<-chan docker.Event, error) {
	ch, broken := make(chan docker.Event), make(chan struct{})
	f.mu.Lock()
	f.streams = append(f.streams, broken)
	f.mu.Unlock()
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-broken:
		}
	}()
	return ch, nil
}

// breakEvents ends every event stream open now, as a daemon restart or a cut socket would.
func (f *fakeEngine) breakEvents() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.streams {
		close(b)
	}
	f.streams = nil
}

// The rest of docker.Driver: a daemon with no networks, proxies or inventory of its own (the
// egress fakes of egress_test.go and the reaper's of reap_test.go answer these). None of them
// is logged: they are not the calls a test sequences.

var errFakeTopology = errors.New("fake engine: no allowlist topology")

func (f *fakeEngine) NetworkCreate(context.Context, docker.NetworkSpec) (string, error) {
	return "", errFakeTopology
}

func (f *fakeEngine) NetworkInspect(_ context.Context, ref string) (docker.NetworkInfo, error) {
	return docker.NetworkInfo{}, fmt.Errorf("network %s: %w", ref, docker.ErrNotFound)
}

func (f *fakeEngine) NetworkConnect(context.Context, string, string) error { return errFakeTopology }

func (f *fakeEngine) NetworkRemove(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

func (f *fakeEngine) ProxyCreate(context.Context, docker.ProxySpec) (string, error) {
	return "", errFakeTopology
}

func (f *fakeEngine) ProxyStart(_ context.Context, id string) error {
	return fmt.Errorf("proxy %s: %w", id, docker.ErrNotFound)
}

func (f *fakeEngine) ProxyStop(_ context.Context, id string, _ time.Duration) error {
	return fmt.Errorf("proxy %s: %w", id, docker.ErrNotFound)
}

func (f *fakeEngine) ProxyLogs(_ context.Context, id string, _, _ int) ([]byte, error) {
	return nil, fmt.Errorf("proxy %s: %w", id, docker.ErrNotFound)
}

func (f *fakeEngine) ListContainerIDs(context.Context, map[string]string) ([]string, error) {
	return nil, nil
}

func (f *fakeEngine) ListNetworkIDs(context.Context, map[string]string) ([]string, error) {
	return nil, nil
}

func (f *fakeEngine) InspectContainerID(_ context.Context, id string) (docker.Resource, error) {
	return docker.Resource{}, fmt.Errorf("container %s: %w", id, docker.ErrNotFound)
}

func (f *fakeEngine) InspectNetworkID(_ context.Context, id string) (docker.Resource, error) {
	return docker.Resource{}, fmt.Errorf("network %s: %w", id, docker.ErrNotFound)
}

func (f *fakeEngine) RemoveContainerID(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

func (f *fakeEngine) RemoveNetworkID(context.Context, string) (docker.RemoveOutcome, error) {
	return docker.Absent, nil
}

func (f *fakeEngine) EngineID(context.Context) (string, error) { return "fake-engine", nil }

// ExecWithStart reports the start when the exec has ended: the fake cannot tell sooner, so a
// freeze waits for the whole exec (starterEngine tells sooner).
func (f *fakeEngine) ExecWithStart(ctx context.Context, req docker.ExecRequest, started func()) (docker.ExecOutput, error) {
	defer started()
	return f.Exec(ctx, req)
}

// StatType is Stat, with the owner unknown as the engine's kind-only stat leaves it.
func (f *fakeEngine) StatType(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	e, err := f.Stat(ctx, target, guestPath)
	if e != nil {
		c := *e
		c.UID, c.GID = -1, -1
		e = &c
	}
	return e, err
}

// SecurityOptions answers a plain rootful daemon's (the fake's endpoint is no host socket, so
// the host file plane is refused before they are asked).
func (f *fakeEngine) SecurityOptions(context.Context) ([]string, error) {
	return []string{"name=seccomp,profile=default"}, nil
}

var _ docker.Driver = (*fakeEngine)(nil)

func short(s string) string {
	if len(s) == 64 {
		return "id"
	}
	return s
}
