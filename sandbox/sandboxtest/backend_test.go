package sandboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

func key(thread, agent string) sandbox.Key {
	return sandbox.Key{Scope: "tenant", ThreadID: thread, AgentID: agent}
}

func spec(t *testing.T, kind string, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	s, err := sandbox.NewSpec(kind, opts...)
	if err != nil {
		t.Fatalf("NewSpec: %v", err)
	}
	return s
}

func TestBackendDefaults(t *testing.T) {
	b, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "fake" || b.Isolation() != sandbox.IsolationNone {
		t.Fatalf("Name, Isolation = %q, %q", b.Name(), b.Isolation())
	}
	d := b.Declarations()
	if got := d.EffectiveCapabilities().String(); got != sandbox.DefaultCapabilities().String() {
		t.Fatalf("capabilities %s", got)
	}
	if !d.EgressModes.Has(sandbox.EgressAllowlist) || !d.EgressModes.Has(sandbox.EgressClosed) || d.EgressModes.Has(sandbox.EgressUnrestricted) {
		t.Fatalf("egress modes %v", d.EgressModes.Sorted())
	}
	if _, legacy := any(b).(sandbox.LegacyDeclarer); legacy {
		t.Fatal("the fake looks like a legacy backend to the router")
	}
	err = b.Sandbox().Reset(context.Background(), 0)
	var unsupported *sandbox.UnsupportedError
	if !errors.As(err, &unsupported) || unsupported.Backend != "fake" {
		t.Fatalf("Reset = %v, want an UnsupportedError naming the backend", err)
	}
}

func TestBackendOptions(t *testing.T) {
	own, err := sandboxtest.NewSandbox(sandboxtest.WithInstanceID("own"))
	if err != nil {
		t.Fatal(err)
	}
	decl := sandbox.Declarations{Capabilities: sandbox.NewCapabilitySet(sandbox.RunCode)}
	cases := []struct {
		name    string
		opts    []sandboxtest.Option
		check   func(*sandboxtest.Backend) error
		wantErr bool
	}{
		{"name", []sandboxtest.Option{sandboxtest.WithName("docker-ish")}, func(b *sandboxtest.Backend) error {
			return want(b.Name() == "docker-ish", "name %q", b.Name())
		}, false},
		{"an empty name", []sandboxtest.Option{sandboxtest.WithName("")}, nil, true},
		{"isolation off the ladder is kept", []sandboxtest.Option{sandboxtest.WithIsolation("process")}, func(b *sandboxtest.Backend) error {
			return want(b.Isolation() == "process", "isolation %q", b.Isolation())
		}, false},
		{"declarations", []sandboxtest.Option{sandboxtest.WithDeclarations(decl)}, func(b *sandboxtest.Backend) error {
			d := b.Declarations()
			return want(d.Capabilities.Has(sandbox.RunCode) && len(d.EgressModes) == 0, "declarations %+v", d)
		}, false},
		{"capabilities only", []sandboxtest.Option{sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesOut)}, func(b *sandboxtest.Backend) error {
			d := b.Declarations()
			return want(d.Capabilities.String() == "exec, files_out" && d.EgressModes.Has(sandbox.EgressClosed), "declarations %+v", d)
		}, false},
		{"a given sandbox", []sandboxtest.Option{sandboxtest.WithSandbox(own)}, func(b *sandboxtest.Backend) error {
			return want(b.Sandbox() == own, "sandbox %s", b.Sandbox().InstanceID())
		}, false},
		{"a nil sandbox", []sandboxtest.Option{sandboxtest.WithSandbox(nil)}, nil, true},
		{"sandbox options", []sandboxtest.Option{sandboxtest.WithName("n"), sandboxtest.WithSandboxOptions(sandboxtest.WithInstanceID("built"))},
			func(b *sandboxtest.Backend) error {
				return want(b.Sandbox().InstanceID() == "built", "instance %q", b.Sandbox().InstanceID())
			}, false},
		{"bad sandbox options", []sandboxtest.Option{sandboxtest.WithSandboxOptions(sandboxtest.WithInstanceID(""))}, nil, true},
		{"nil options are skipped", []sandboxtest.Option{nil}, func(*sandboxtest.Backend) error { return nil }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := sandboxtest.New(tc.opts...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("New error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if err := tc.check(b); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func TestBackendAcquire(t *testing.T) {
	ctx := context.Background()
	b, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	s1, err := b.Acquire(ctx, key("t1", "a"), spec(t, "python"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := b.Acquire(ctx, key("t2", "a"), spec(t, "shell"))
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || s1 != sandbox.Sandbox(b.Sandbox()) {
		t.Fatal("the fake handed out more than one sandbox")
	}
	acq := b.Acquires()
	if len(acq) != 2 || acq[0].Key != key("t1", "a") || acq[1].Spec.Kind != "shell" {
		t.Fatalf("recorded %+v", acq)
	}
	if live := b.Live(); len(live) != 2 || live[0].Kind != "python" {
		t.Fatalf("live %+v", live)
	}

	b.SetAcquireError(errBoom)
	got, err := b.Acquire(ctx, key("t3", "a"), spec(t, "python"))
	if !errors.Is(err, errBoom) || got != nil {
		t.Fatalf("Acquire = %v, %v; want nil and the configured error", got, err)
	}
	if len(b.Acquires()) != 3 {
		t.Fatal("a failed acquire was not recorded")
	}
	b.SetAcquireError(nil)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Acquire(cancelled, key("t4", "a"), spec(t, "python")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v", err)
	}
}

func TestBackendAcquireError(t *testing.T) {
	b, err := sandboxtest.New(sandboxtest.WithAcquireError(&sandbox.OSFamilyNotSupportedError{Backend: "fake", Requested: sandbox.OSWindows}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Acquire(context.Background(), key("t", "a"), spec(t, "k"))
	if got != nil || !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Acquire = %v, %v", got, err)
	}
}

func TestBackendAcquireStorageBase(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		seed     func(*sandboxtest.Sandbox)
		spec     []sandbox.SpecOption
		wantBase string
		wantErr  error
	}{
		{"the default base is ensured", func(sb *sandboxtest.Sandbox) {}, nil, work, nil},
		{"a named base is bound and created", func(sb *sandboxtest.Sandbox) {}, []sandbox.SpecOption{sandbox.WithWorkDir("/srv/data")}, "/srv/data", nil},
		{"a linked base is refused", func(sb *sandboxtest.Sandbox) { sb.AddSymlink("/srv", "/") },
			[]sandbox.SpecOption{sandbox.WithWorkDir("/srv/data")}, work, &sandbox.NotConfinedError{}},
		{"a file in the way is refused", func(sb *sandboxtest.Sandbox) { sb.AddFile("/srv", nil) },
			[]sandbox.SpecOption{sandbox.WithWorkDir("/srv/data")}, work, &sandbox.NotDirectoryError{}},
		{"a relative base is refused", func(sb *sandboxtest.Sandbox) {},
			[]sandbox.SpecOption{sandbox.WithWorkDir("data")}, work, &sandbox.InvalidArgumentError{}},
		{"a runtime-only spec needs no base", func(sb *sandboxtest.Sandbox) { sb.AddSymlink("/srv", "/") },
			[]sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode), sandbox.WithWorkDir("/srv/data")}, work, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := sandboxtest.New()
			if err != nil {
				t.Fatal(err)
			}
			tc.seed(b.Sandbox())
			_, err = b.Acquire(ctx, key("t", "a"), spec(t, "k", tc.spec...))
			checkErr(t, err, tc.wantErr)
			if got := b.Sandbox().StorageBase(); got != tc.wantBase {
				t.Fatalf("StorageBase = %q, want %q", got, tc.wantBase)
			}
			if k, ok := b.Sandbox().Kind(tc.wantBase); !ok || k != sandbox.EntryDirectory {
				t.Fatalf("the base %s is not a directory", tc.wantBase)
			}
		})
	}
}

func TestBackendDispose(t *testing.T) {
	ctx := context.Background()
	python := "python"
	b, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"python", "shell"} {
		if _, err := b.Acquire(ctx, key("t1", "a"), spec(t, k)); err != nil {
			t.Fatal(err)
		}
	}
	if f := b.Dispose(ctx, key("t1", "a"), sandbox.DisposeOptions{Kind: &python}); f != nil {
		t.Fatalf("Dispose = %v", f)
	}
	if live := b.Live(); len(live) != 1 || live[0].Kind != "shell" {
		t.Fatalf("live after disposing one kind: %+v", live)
	}

	b.SetDisposeFailure(&sandbox.DisposalFailure{Code: sandbox.DisposalUnreachable, Detail: "daemon down"})
	f := b.Dispose(ctx, key("t1", "a"), sandbox.DisposeOptions{})
	if f == nil || f.Code != sandbox.DisposalUnreachable {
		t.Fatalf("Dispose = %v, want the configured failure", f)
	}
	f.Code = sandbox.DisposalUnknown
	if again := b.Dispose(ctx, key("t1", "a"), sandbox.DisposeOptions{}); again.Code != sandbox.DisposalUnreachable {
		t.Fatal("a caller changed the configured failure")
	}
	if len(b.Live()) != 1 {
		t.Fatal("a failed disposal forgot the sandbox")
	}
	b.SetDisposeFailure(nil)
	if f := b.Dispose(ctx, key("t1", "a"), sandbox.DisposeOptions{}); f != nil || len(b.Live()) != 0 {
		t.Fatalf("Dispose = %v, live %+v", f, b.Live())
	}
	if d := b.Disposals(); len(d) != 4 || *d[0].Options.Kind != "python" {
		t.Fatalf("recorded %+v", d)
	}

	fixed, err := sandboxtest.New(sandboxtest.WithDisposeFailure(sandbox.DisposalFailure{Code: sandbox.DisposalTimeout}))
	if err != nil {
		t.Fatal(err)
	}
	if f := fixed.Dispose(ctx, key("t", "a"), sandbox.DisposeOptions{}); f == nil || f.Code != sandbox.DisposalTimeout {
		t.Fatalf("Dispose = %v", f)
	}
}

func TestBackendDisposeScope(t *testing.T) {
	ctx := context.Background()
	b, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []sandbox.Key{key("t1", "a"), key("t1", "b"), key("t2", "a")} {
		if _, err := b.Acquire(ctx, k, spec(t, "python")); err != nil {
			t.Fatal(err)
		}
	}
	if p := b.DisposeScope(ctx, "tenant", "t1"); p.Disposed != 2 || p.Undisposed != nil {
		t.Fatalf("DisposeScope = %+v", p)
	}
	if p := b.DisposeScope(ctx, "tenant", "t1"); p.Disposed != 0 {
		t.Fatalf("a second DisposeScope = %+v", p)
	}
	if s := b.ScopeDisposals(); len(s) != 2 || s[0] != (sandboxtest.ScopeDisposal{Scope: "tenant", ThreadID: "t1"}) {
		t.Fatalf("recorded %+v", s)
	}

	purge := sandbox.ScopePurge{Disposed: 1, Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalUnlisted}}
	fixed, err := sandboxtest.New(sandboxtest.WithScopePurge(purge))
	if err != nil {
		t.Fatal(err)
	}
	if p := fixed.DisposeScope(ctx, "s", "t"); p.Disposed != 1 || p.Undisposed.Code != sandbox.DisposalUnlisted {
		t.Fatalf("DisposeScope = %+v", p)
	}
}

// TestBackendConcurrentUse acquires and disposes from many goroutines; -race checks the
// locking.
func TestBackendConcurrentUse(t *testing.T) {
	ctx := context.Background()
	b, err := sandboxtest.New()
	if err != nil {
		t.Fatal(err)
	}
	s := spec(t, "python")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			k := key(fmt.Sprintf("t%d", i%4), "a")
			_, _ = b.Acquire(ctx, k, s)
			_ = b.Declarations()
			_ = b.Dispose(ctx, k, sandbox.DisposeOptions{})
			_ = b.DisposeScope(ctx, "tenant", k.ThreadID)
			_ = b.Acquires()
			_ = b.Live()
		})
	}
	wg.Wait()
	if n := len(b.Acquires()); n != 16 {
		t.Fatalf("%d acquires recorded, want 16", n)
	}
}
