package actors

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// teardownNet is the egress fake that also records, in order, every container and network
// that a removal actually took away (by name, whatever the removal addressed), and can hold
// a proxy's start to keep an acquire in progress.
type teardownNet struct {
	*netFake
	omu             sync.Mutex
	removed         []string
	onProxyStart    func()
	onNetworkRemove func()
}

func newTeardownNet() *teardownNet { return &teardownNet{netFake: newNetFake()} }

func (f *teardownNet) note(name string) {
	f.omu.Lock()
	defer f.omu.Unlock()
	f.removed = append(f.removed, name)
}

// sameTeardown reports whether got is the teardown want: the network last and, unless
// ordered, the proxy and the workload in either order (a purge removes them at once).
func sameTeardown(got, want []string, ordered bool) bool {
	if ordered || len(got) != len(want) || len(want) < 2 {
		return slices.Equal(got, want)
	}
	last := len(want) - 1
	g, w := slices.Clone(got[:last]), slices.Clone(want[:last])
	slices.Sort(g)
	slices.Sort(w)
	return got[last] == want[last] && slices.Equal(g, w)
}

// removedSince returns what was removed after the first mark entries.
func (f *teardownNet) removedSince(mark int) []string {
	f.omu.Lock()
	defer f.omu.Unlock()
	return slices.Clone(f.removed[mark:])
}

func (f *teardownNet) mark() int {
	f.omu.Lock()
	defer f.omu.Unlock()
	return len(f.removed)
}

func (f *teardownNet) Remove(ctx context.Context, target string) (docker.RemoveOutcome, error) {
	c := f.find(target)
	out, err := f.netFake.Remove(ctx, target)
	if c != nil && err == nil && out == docker.Removed {
		f.note(c.name)
	}
	return out, err
}

func (f *teardownNet) NetworkRemove(ctx context.Context, id string) (docker.RemoveOutcome, error) {
	if f.onNetworkRemove != nil {
		f.onNetworkRemove()
	}
	n := f.findNet(id)
	out, err := f.netFake.NetworkRemove(ctx, id)
	if n != nil && err == nil && out == docker.Removed {
		f.note(n.name)
	}
	return out, err
}

func (f *teardownNet) ProxyStart(ctx context.Context, id string) error {
	if f.onProxyStart != nil {
		f.onProxyStart()
	}
	return f.netFake.ProxyStart(ctx, id)
}

// Every disposal path takes an allowlisted sandbox down in one order — proxy (drained, its
// window published after its removal), workload, network — and leaves nothing behind.
func TestDisposeEgressOrderOnEveryPath(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name     string
		orphan   bool // the workload is gone before the disposal: only its proxy is listed
		dispose  func(t *testing.T, b *Backend, instance string) (disposed int, failure *sandbox.DisposalFailure)
		trigger  egresslog.Trigger
		disposed int // -1: the path does not count
	}{
		{"dispose", false, func(t *testing.T, b *Backend, _ string) (int, *sandbox.DisposalFailure) {
			return -1, b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{})
		}, egresslog.TriggerDispose, -1},
		{"scope purge", false, func(t *testing.T, b *Backend, _ string) (int, *sandbox.DisposalFailure) {
			p := b.DisposeScope(context.Background(), testKey.Scope, testKey.ThreadID)
			return p.Disposed, p.Undisposed
		}, egresslog.TriggerDisposeScope, 1},
		{"instance", false, func(t *testing.T, b *Backend, id string) (int, *sandbox.DisposalFailure) {
			return -1, b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{InstanceID: id})
		}, egresslog.TriggerDispose, -1},
		{"orphan proxy", true, func(t *testing.T, b *Backend, _ string) (int, *sandbox.DisposalFailure) {
			p := b.DisposeScope(context.Background(), testKey.Scope, testKey.ThreadID)
			return p.Disposed, p.Undisposed
		}, egresslog.TriggerDisposeScope, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTeardownNet()
			s := &sink{}
			b := egressBackend(t, f, WithObserver(s))
			spec := allowSpec(t, "a.example")
			sb, err := b.Acquire(context.Background(), testKey, spec)
			if err != nil {
				t.Fatal(err)
			}
			n := workloadName(b, spec)
			proxyID := f.find(docker.ProxyName(n)).id
			f.decide(n, "ALLOW a.example:443")
			want := []string{docker.ProxyName(n), n, docker.NetworkName(n)}
			if tc.orphan {
				if _, err := f.netFake.Remove(context.Background(), n); err != nil {
					t.Fatal(err)
				}
				// A fresh process: nothing registered, only the proxy is listed.
				b = egressBackend(t, f, WithObserver(s))
				want = []string{docker.ProxyName(n), docker.NetworkName(n)}
			}
			mark := f.mark()
			disposed, failure := tc.dispose(t, b, sb.InstanceID())
			if failure != nil {
				t.Fatalf("failure %+v", failure)
			}
			if tc.disposed >= 0 && disposed != tc.disposed {
				t.Fatalf("disposed %d, want %d", disposed, tc.disposed)
			}
			b.awaitNetworkRemovals()
			if got := f.removedSince(mark); !sameTeardown(got, want, tc.name == "instance") {
				t.Fatalf("removed %v, want %v (calls %v)", got, want, f.Calls())
			}
			if len(f.containers) != 0 || len(f.networks) != 0 {
				t.Fatalf("left: %v %v", f.containers, f.networks)
			}
			ws := s.got()
			if len(ws) != 1 || ws[0].ProxyID != proxyID || ws[0].Key != testKey || ws[0].Trigger != string(tc.trigger) ||
				ws[0].Removal != "removed" || !ws[0].Closed || ws[0].Kind != "k" || len(ws[0].Decisions) != 1 {
				t.Fatalf("windows %+v", ws)
			}
		})
	}
}

// A purge issued while an acquire of the same sandbox is in progress waits for it in the
// sandbox's mailbox: it touches nothing meanwhile, the acquire completes, and the purge then
// takes down what the acquire built, publishing the window of the proxy the acquire made.
func TestDisposeEgressPurgeWaitsForAcquireInProgress(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	s := &sink{}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	n := workloadName(b, spec)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onProxyStart = func() {
		once.Do(func() {
			f.decide(n, "ALLOW a.example:443")
			close(started)
			<-release
		})
	}
	ctx := context.Background()
	acquired := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, testKey, spec)
		acquired <- err
	}()
	<-started
	proxyID := f.find(docker.ProxyName(n)).id
	before := len(f.Calls())
	disposed := make(chan *sandbox.DisposalFailure, 1)
	go func() { disposed <- b.Dispose(ctx, testKey, sandbox.DisposeOptions{}) }()
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(f.Calls()[before:], "ps"); {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the purge never listed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // room for a purge that would race the acquire
	// The acquire prepares its workload while the proxy starts: those calls are its own.
	calls := slices.DeleteFunc(slices.Clone(f.Calls()[before:]), func(c string) bool {
		return c == "inspect "+n || c == "image" || c == "create "+n || c == "cp-in" ||
			strings.HasPrefix(c, "stat ") || strings.HasPrefix(c, "read ")
	})
	// Two listings: the key's labels, and the warm pool's bound members (pool_binding.go).
	if !slices.Equal(calls, []string{"ps", "ps"}) {
		close(release)
		t.Fatalf("the purge reached the engine while the acquire was in progress: %v", calls)
	}
	if len(s.got()) != 0 {
		close(release)
		t.Fatal("a window was published while the acquire was in progress")
	}
	close(release)
	if err := <-acquired; err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if failure := <-disposed; failure != nil {
		t.Fatalf("dispose: %+v", failure)
	}
	b.awaitNetworkRemovals()
	if got, want := f.removedSince(0), []string{docker.ProxyName(n), n, docker.NetworkName(n)}; !sameTeardown(got, want, false) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	if len(f.containers) != 0 || len(f.networks) != 0 {
		t.Fatalf("left: %v %v", f.containers, f.networks)
	}
	if ws := s.got(); len(ws) != 1 || ws[0].ProxyID != proxyID || ws[0].Trigger != string(egresslog.TriggerDispose) || len(ws[0].Decisions) != 1 {
		t.Fatalf("windows %+v", ws)
	}
}

// A purge whose proxy cannot be removed still removes the workload and does not fail the key
// (the proxy is an infrastructure leak, logged; its network, still in use, stays too). The
// next purge finds the orphan proxy by label, drains it once and removes it, then the network.
func TestDisposeEgressPurgeProxyLeakIsLoggedNotFailed(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	s := &sink{}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	f.decide(n, "DENY x.example:443")
	f.removeProxy = func(string) (docker.RemoveOutcome, error) {
		return 0, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("removal refused")}
	}
	mark := f.mark()
	if failure := b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("a proxy leak failed the key: %+v", failure)
	}
	b.awaitNetworkRemovals()
	if got := f.removedSince(mark); !slices.Equal(got, []string{n}) {
		t.Fatalf("removed %v, want only the workload", got)
	}
	if f.find(docker.ProxyName(n)) == nil || f.findNet(docker.NetworkName(n)) == nil || len(s.got()) != 0 {
		t.Fatalf("the refused proxy, its network and no window should remain: %v %v", f.containers, s.got())
	}
	f.removeProxy = nil
	mark = f.mark()
	if failure := b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("second dispose: %+v", failure)
	}
	b.awaitNetworkRemovals()
	if got, want := f.removedSince(mark), []string{docker.ProxyName(n), docker.NetworkName(n)}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	if ws := s.got(); len(ws) != 1 || len(ws[0].Decisions) != 1 || ws[0].Key != testKey {
		t.Fatalf("windows %+v", ws)
	}
}

// Instance-targeted disposal (docker-backend §14.4): a proxy that cannot be removed fails the
// call and leaves the instance, retained, so that the next disposal of the key sweeps it
// whole; no window is published until a removal succeeds.
func TestDisposeEgressInstanceProxyFailureLeavesTheInstance(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	s := &sink{}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	sb, err := b.Acquire(context.Background(), testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	f.decide(n, "ALLOW a.example:443")
	f.removeProxy = func(string) (docker.RemoveOutcome, error) {
		return 0, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("removal refused")}
	}
	mark := f.mark()
	failure := b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{InstanceID: sb.InstanceID()})
	if failure == nil || failure.Code != sandbox.DisposalRefused {
		t.Fatalf("failure %+v, want refused", failure)
	}
	if got := f.removedSince(mark); len(got) != 0 || len(s.got()) != 0 {
		t.Fatalf("removed %v, windows %v; want nothing", got, s.got())
	}
	f.removeProxy = nil
	if failure := b.Dispose(context.Background(), testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("retry: %+v", failure)
	}
	b.awaitNetworkRemovals()
	if got, want := f.removedSince(mark), []string{docker.ProxyName(n), n, docker.NetworkName(n)}; !sameTeardown(got, want, false) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	if ws := s.got(); len(ws) != 1 || len(ws[0].Decisions) != 1 {
		t.Fatalf("windows %+v", ws)
	}
}

// Disposing an instance that is already gone touches nothing: the proxy and network that now
// carry its names belong to its successor.
func TestDisposeEgressGoneInstanceLeavesTheSuccessor(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	s := &sink{}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	ctx := context.Background()
	first, err := b.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{InstanceID: first.InstanceID()}); failure != nil {
		t.Fatal(failure)
	}
	second, err := b.Acquire(ctx, testKey, spec)
	if err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	f.decide(n, "ALLOW a.example:443")
	mark := f.mark()
	if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{InstanceID: first.InstanceID()}); failure != nil {
		t.Fatal(failure)
	}
	if got := f.removedSince(mark); len(got) != 0 {
		t.Fatalf("disposing a gone instance removed %v", got)
	}
	if f.find(second.InstanceID()) == nil || f.find(docker.ProxyName(n)) == nil || f.findNet(docker.NetworkName(n)) == nil {
		t.Fatal("the successor lost part of its sandbox")
	}
	if len(s.got()) != 0 {
		t.Fatalf("windows %+v", s.got())
	}
}

// A disposal answers before its network is removed (docs/operations.md, "What a disposal's
// answer promises"): the proxy and the workload are gone and the window is published by then;
// an acquire of the same sandbox that follows at once waits for the removal rather than adopt
// a network on its way out, and builds a fresh one.
func TestDisposeEgressNetworkRemovalAfterTheReply(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	s := &sink{}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	ctx := context.Background()
	if _, err := b.Acquire(ctx, testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	f.decide(n, "ALLOW a.example:443")
	oldNet := f.findNet(docker.NetworkName(n)).id
	removing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onNetworkRemove = func() { once.Do(func() { close(removing); <-release }) }
	if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("dispose: %+v", failure)
	}
	<-removing
	if f.find(n) != nil || f.find(docker.ProxyName(n)) != nil || len(s.got()) != 1 {
		t.Fatalf("the reply came before the workload and proxy were gone or the window published: %v", s.got())
	}
	before := len(f.Calls())
	acquired := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, testKey, spec)
		acquired <- err
	}()
	time.Sleep(100 * time.Millisecond) // room for an acquire that would not wait
	for _, c := range f.Calls()[before:] {
		if strings.HasPrefix(c, "network") {
			close(release)
			t.Fatalf("the acquire touched the network while its removal was under way: %v", f.Calls()[before:])
		}
	}
	close(release)
	if err := <-acquired; err != nil {
		t.Fatalf("acquire after dispose: %v", err)
	}
	if nn := f.findNet(docker.NetworkName(n)); nn == nil || nn.id == oldNet {
		t.Fatalf("the acquire did not build a fresh network: %+v", nn)
	}
	if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("second dispose: %+v", failure)
	}
	b.awaitNetworkRemovals()
	if len(f.containers) != 0 || len(f.networks) != 0 {
		t.Fatalf("left: %v %v", f.containers, f.networks)
	}
}

// Close waits for the network removals disposals left running after their replies.
func TestDisposeEgressCloseWaitsForNetworkRemoval(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	b := egressBackend(t, f, WithObserver(&sink{}))
	spec := allowSpec(t, "a.example")
	ctx := context.Background()
	if _, err := b.Acquire(ctx, testKey, spec); err != nil {
		t.Fatal(err)
	}
	removing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onNetworkRemove = func() { once.Do(func() { close(removing); <-release }) }
	if failure := b.Dispose(ctx, testKey, sandbox.DisposeOptions{}); failure != nil {
		t.Fatalf("dispose: %+v", failure)
	}
	<-removing
	closed := make(chan struct{})
	go func() { b.Close(ctx); close(closed) }()
	select {
	case <-closed:
		close(release)
		t.Fatal("Close returned while a network removal was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if len(f.networks) != 0 {
		t.Fatalf("left: %v", f.networks)
	}
}
