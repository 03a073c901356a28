package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// Keys of one conversation: convKey is conversation-scoped, callKey carries a CallID.
var (
	convKey       = sandbox.Key{Scope: "tenant", ThreadID: "thread", AgentID: "agent"}
	callKey       = sandbox.Key{Scope: "tenant", ThreadID: "thread", AgentID: "agent", CallID: "call-1"}
	otherKey      = sandbox.Key{Scope: "tenant", ThreadID: "other-thread", AgentID: "agent"}
	errEngineDown = errors.New("engine unreachable")
)

// mustRouter builds a router or fails the test.
func mustRouter(t *testing.T, backends []sandbox.Backend, opts ...sandbox.RouterOption) *sandbox.Router {
	t.Helper()
	r, err := sandbox.NewRouter(backends, opts...)
	if err != nil {
		t.Fatalf("NewRouter: %v", err)
	}
	return r
}

// mustFake builds a fake backend or fails the test.
func mustFake(t *testing.T, opts ...sandboxtest.Option) *sandboxtest.Backend {
	t.Helper()
	b, err := sandboxtest.New(opts...)
	if err != nil {
		t.Fatalf("sandboxtest.New: %v", err)
	}
	return b
}

// mustSandbox builds a fake sandbox or fails the test.
func mustSandbox(t *testing.T, opts ...sandboxtest.SandboxOption) *sandboxtest.Sandbox {
	t.Helper()
	sb, err := sandboxtest.NewSandbox(opts...)
	if err != nil {
		t.Fatalf("sandboxtest.NewSandbox: %v", err)
	}
	return sb
}

// specOf builds a spec of kind with opts applied, or fails the test.
func specOf(t *testing.T, kind string, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	spec, err := sandbox.NewSpec(kind, opts...)
	if err != nil {
		t.Fatalf("NewSpec(%q): %v", kind, err)
	}
	return spec
}

// backends lists bs as the router's interface type.
func backends[B sandbox.Backend](bs ...B) []sandbox.Backend {
	out := make([]sandbox.Backend, len(bs))
	for i, b := range bs {
		out[i] = b
	}
	return out
}

// checkRouterErr fails unless err matches want and names every string in mentions. want nil
// wants no error; a pointer to one of the protocol's error structs is matched by type with
// errors.As (its field values are ignored); any other error is matched with errors.Is.
func checkRouterErr(t *testing.T, err, want error, mentions ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("error = %v (%T), want none", err, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("error = nil, want %T", want)
	}
	if wt := reflect.TypeOf(want); wt.Kind() == reflect.Pointer && wt.Elem().Kind() == reflect.Struct {
		target := reflect.New(wt)
		if !errors.As(err, target.Interface()) {
			t.Fatalf("error = %v (%T), want a %s", err, err, wt)
		}
	} else if !errors.Is(err, want) {
		t.Fatalf("error = %v (%T), want %v", err, err, want)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("error %q does not mention %q", err.Error(), m)
		}
	}
}

// legacyCaps is a backend that still exposes the legacy capabilities attribute.
type legacyCaps struct{ *sandboxtest.Backend }

func (legacyCaps) Capabilities() sandbox.CapabilitySet { return sandbox.DefaultCapabilities() }

// legacyLimits exposes the legacy limits attribute.
type legacyLimits struct{ *sandboxtest.Backend }

func (legacyLimits) Limits() sandbox.SandboxLimits { return sandbox.DefaultSandboxLimits() }

// legacyEgress exposes the legacy egress-modes attribute.
type legacyEgress struct{ *sandboxtest.Backend }

func (legacyEgress) EgressModes() sandbox.EgressSet {
	return sandbox.NewEgressSet(sandbox.EgressClosed)
}

// legacyOS exposes the legacy OS-families attribute.
type legacyOS struct{ *sandboxtest.Backend }

func (legacyOS) OSFamilies() []sandbox.OSFamily { return []sandbox.OSFamily{sandbox.OSPosix} }

// handing is a backend that records each acquire with the fake and then hands out what hand
// returns for the n-th acquire (1-based). A nil hand hands out the fake's sandbox.
type handing struct {
	*sandboxtest.Backend
	mu   sync.Mutex
	n    int
	hand func(n int) (sandbox.Sandbox, error)
}

func (b *handing) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := b.Backend.Acquire(ctx, key, spec)
	if err != nil || b.hand == nil {
		return sb, err
	}
	b.mu.Lock()
	b.n++
	n := b.n
	b.mu.Unlock()
	return b.hand(n)
}

// fresh is a sandbox that says whether the acquire handing it out created it.
type fresh struct {
	*sandboxtest.Sandbox
	created bool
}

func (f fresh) Created() bool { return f.created }

// noID is a sandbox breaking the protocol: its instance ID is empty.
type noID struct{ *sandboxtest.Sandbox }

func (noID) InstanceID() string { return "" }

// blocking is a backend whose Acquire announces itself on entered and then waits for
// release (or ctx) before handing out the fake's sandbox as a created one. Only kinds in
// slow block when slow is set; the others go straight to the fake. It records how many
// acquires of each kind were inside at once.
type blocking struct {
	*sandboxtest.Backend
	entered chan string // receives the kind of every acquire that blocks
	release chan struct{}
	slow    map[string]bool

	mu      sync.Mutex
	inside  map[string]int
	maxSeen map[string]int
}

func newBlocking(t *testing.T, opts ...sandboxtest.Option) *blocking {
	return &blocking{Backend: mustFake(t, opts...), entered: make(chan string, 16), release: make(chan struct{}),
		inside: map[string]int{}, maxSeen: map[string]int{}}
}

func (b *blocking) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if b.slow != nil && !b.slow[spec.Kind] {
		return b.Backend.Acquire(ctx, key, spec)
	}
	b.mu.Lock()
	b.inside[spec.Kind]++
	b.maxSeen[spec.Kind] = max(b.maxSeen[spec.Kind], b.inside[spec.Kind])
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inside[spec.Kind]--
		b.mu.Unlock()
	}()
	b.entered <- spec.Kind
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return fresh{b.Sandbox(), true}, nil
}

// most is the largest number of acquires of kind that were inside Acquire at once.
func (b *blocking) most(kind string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.maxSeen[kind]
}

// panicky is a backend whose disposals panic.
type panicky struct{ *sandboxtest.Backend }

func (panicky) Dispose(context.Context, sandbox.Key, sandbox.DisposeOptions) *sandbox.DisposalFailure {
	panic("dispose exploded")
}

func (panicky) DisposeScope(context.Context, string, string) sandbox.ScopePurge {
	panic("purge exploded")
}

// observing is a backend that reports its own acts: it holds an observer, and fails the
// swap with fail when set.
type observing struct {
	*sandboxtest.Backend
	mu    sync.Mutex
	obs   sandbox.Observer
	swaps int
	fail  error
}

func (b *observing) ReportTo(obs sandbox.Observer) (sandbox.Observer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	prev := b.obs
	b.obs = obs
	b.swaps++
	return prev, nil
}

// reporter is the observer the backend holds now.
func (b *observing) reporter() sandbox.Observer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.obs
}

// counted is an observer that counts the egress windows it hears.
type counted struct {
	sandbox.NopObserver
	n *int
}

func (c counted) EgressObserved(context.Context, sandbox.EgressWindow) { *c.n++ }

// events is an observer recording every event; with explode set it records and then panics.
type events struct {
	sandbox.NopObserver
	explode  bool
	mu       sync.Mutex
	acquired []sandbox.SandboxAcquired
	disposed []sandbox.SandboxDisposed
	scopes   []sandbox.ScopeDisposed
	egress   []sandbox.EgressWindow
}

func (e *events) record(f func()) {
	e.mu.Lock()
	f()
	e.mu.Unlock()
	if e.explode {
		panic("observer exploded")
	}
}

func (e *events) SandboxAcquired(_ context.Context, ev sandbox.SandboxAcquired) {
	e.record(func() { e.acquired = append(e.acquired, ev) })
}

func (e *events) SandboxDisposed(_ context.Context, ev sandbox.SandboxDisposed) {
	e.record(func() { e.disposed = append(e.disposed, ev) })
}

func (e *events) ScopeDisposed(_ context.Context, ev sandbox.ScopeDisposed) {
	e.record(func() { e.scopes = append(e.scopes, ev) })
}

func (e *events) EgressObserved(_ context.Context, ev sandbox.EgressWindow) {
	e.record(func() { e.egress = append(e.egress, ev) })
}

// failure returns a disposal failure with code and detail.
func failure(code sandbox.DisposalCode, detail string) sandbox.DisposalFailure {
	return sandbox.DisposalFailure{Code: code, Detail: detail}
}

// stuckDispose is a backend whose Dispose announces itself on entered and waits for release.
type stuckDispose struct {
	*sandboxtest.Backend
	entered chan struct{}
	release chan struct{}
}

func (b *stuckDispose) Dispose(ctx context.Context, key sandbox.Key, opts sandbox.DisposeOptions) *sandbox.DisposalFailure {
	b.entered <- struct{}{}
	<-b.release
	return b.Backend.Dispose(ctx, key, opts)
}

// fakeAt builds a fake backend called name at isolation iso, with opts after those.
func fakeAt(t *testing.T, name string, iso sandbox.Isolation, opts ...sandboxtest.Option) *sandboxtest.Backend {
	t.Helper()
	return mustFake(t, append([]sandboxtest.Option{sandboxtest.WithName(name), sandboxtest.WithIsolation(iso)}, opts...)...)
}

// checkFamily fails unless errors.Is(err, family); a nil family checks nothing.
func checkFamily(t *testing.T, err, family error) {
	t.Helper()
	if family != nil && !errors.Is(err, family) {
		t.Fatalf("error %v (%T) is not in the %v family", err, err, family)
	}
}

// ctxPurge is a backend whose DisposeScope fails, having asked nothing, when its ctx has
// already ended.
type ctxPurge struct{ *sandboxtest.Backend }

func (b ctxPurge) DisposeScope(ctx context.Context, scope, threadID string) sandbox.ScopePurge {
	if err := ctx.Err(); err != nil {
		return sandbox.ScopePurge{Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalUnknown, Detail: err.Error()}}
	}
	return b.Backend.DisposeScope(ctx, scope, threadID)
}

// fmtErr wraps err as a backend would.
func fmtErr(err error) error { return fmt.Errorf("pull: %w", err) }

// asFake finds the fake inside a test backend, or nil for one that is not a fake.
func asFake(b sandbox.Backend) *sandboxtest.Backend {
	switch b := b.(type) {
	case *sandboxtest.Backend:
		return b
	case *handing:
		return b.Backend
	case *blocking:
		return b.Backend
	}
	return nil
}

// checkPurge fails unless got matches want; want.Undisposed.Detail "" matches any detail,
// which must then name every string in mentions.
func checkPurge(t *testing.T, got, want sandbox.ScopePurge, mentions ...string) {
	t.Helper()
	if got.Disposed != want.Disposed || (got.Undisposed == nil) != (want.Undisposed == nil) {
		t.Fatalf("purge = %+v, want %+v", got, want)
	}
	if want.Undisposed == nil {
		return
	}
	if got.Undisposed.Code != want.Undisposed.Code || (want.Undisposed.Detail != "" && got.Undisposed.Detail != want.Undisposed.Detail) {
		t.Fatalf("undisposed = %+v, want %+v", got.Undisposed, want.Undisposed)
	}
	for _, m := range mentions {
		if !strings.Contains(got.Undisposed.Detail, m) {
			t.Fatalf("detail %q does not mention %q", got.Undisposed.Detail, m)
		}
	}
}

// last is the last acquire the observer heard.
func (e *events) last() sandbox.SandboxAcquired {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.acquired) == 0 {
		return sandbox.SandboxAcquired{}
	}
	return e.acquired[len(e.acquired)-1]
}
