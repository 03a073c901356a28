package sandboxtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mafsandbox/engine/sandbox"
)

// Backend is the in-memory fake of [sandbox.Backend]: it hands out one [Sandbox] for every
// key and kind, and records what it was asked. It is safe for concurrent use.
type Backend struct {
	name         string
	isolation    sandbox.Isolation
	declarations sandbox.Declarations
	sb           *Sandbox

	mu             sync.Mutex
	acquireErr     error
	disposeFailure *sandbox.DisposalFailure
	scopePurge     *sandbox.ScopePurge
	acquires       []Acquisition
	disposals      []Disposal
	scopeDisposals []ScopeDisposal
	live           map[sandbox.SandboxID]struct{}
}

var _ sandbox.Backend = (*Backend)(nil)

// Acquisition is one recorded Acquire.
type Acquisition struct {
	Key  sandbox.Key
	Spec sandbox.Spec
}

// Disposal is one recorded Dispose.
type Disposal struct {
	Key     sandbox.Key
	Options sandbox.DisposeOptions
}

// ScopeDisposal is one recorded DisposeScope.
type ScopeDisposal struct {
	Scope, ThreadID string
}

// New builds a fake backend: name [DefaultName], isolation none, [DefaultDeclarations], and a
// fresh [Sandbox] (built with [WithSandboxOptions] and the backend's name) unless
// [WithSandbox] supplies one. Nil options are skipped; the first option error is returned.
func New(opts ...Option) (*Backend, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	sb := o.sandbox
	if sb == nil {
		var err error
		sb, err = NewSandbox(append([]SandboxOption{WithBackendName(o.name)}, o.sandboxOpts...)...)
		if err != nil {
			return nil, err
		}
	}
	return &Backend{name: o.name, isolation: o.isolation, declarations: o.declarations, sb: sb,
		acquireErr: o.acquireErr, disposeFailure: o.disposeFailure, scopePurge: o.scopePurge,
		live: map[sandbox.SandboxID]struct{}{}}, nil
}

// Name is the configured name.
func (b *Backend) Name() string { return b.name }

// Isolation is the configured rung.
func (b *Backend) Isolation() sandbox.Isolation { return b.isolation }

// Declarations are the configured declarations.
func (b *Backend) Declarations() sandbox.Declarations { return b.declarations }

// Sandbox is the one sandbox Acquire hands out.
func (b *Backend) Sandbox() *Sandbox { return b.sb }

// Acquire records key and spec and returns the one sandbox, or the configured acquire error.
// For a spec that needs a storage base it ensures the base exists first, binding the spec's
// WorkDir when it names one (protocol §7); a link or non-directory on the way fails the
// acquire. A cancelled ctx fails with its wrapped error.
func (b *Backend) Acquire(ctx context.Context, key sandbox.Key, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.mu.Lock()
	b.acquires = append(b.acquires, Acquisition{Key: key, Spec: spec.Clone()})
	err := b.acquireErr
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", key, err)
	}
	if spec.NeedsStorageBase() {
		base := b.sb.StorageBase()
		if spec.WorkDir != nil {
			base = *spec.WorkDir
		}
		if err := b.sb.bindBase(ctx, base); err != nil {
			return nil, fmt.Errorf("prepare storage base: %w", err)
		}
	}
	b.mu.Lock()
	b.live[sandbox.Identity(key, spec.Kind)] = struct{}{}
	b.mu.Unlock()
	return b.sb, nil
}

// Dispose records the call and returns the configured failure (a copy), or nil having
// forgotten the key's live sandboxes (of opts.Kind only, when set).
func (b *Backend) Dispose(_ context.Context, key sandbox.Key, opts sandbox.DisposeOptions) *sandbox.DisposalFailure {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.disposals = append(b.disposals, Disposal{Key: key, Options: opts})
	if b.disposeFailure != nil {
		f := *b.disposeFailure
		return &f
	}
	for id := range b.live {
		if id.Key == key && (opts.Kind == nil || id.Kind == *opts.Kind) {
			delete(b.live, id)
		}
	}
	return nil
}

// DisposeScope records the call, forgets the conversation's live sandboxes and reports how
// many there were, or the configured purge.
func (b *Backend) DisposeScope(_ context.Context, scope, threadID string) sandbox.ScopePurge {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scopeDisposals = append(b.scopeDisposals, ScopeDisposal{Scope: scope, ThreadID: threadID})
	n := 0
	for id := range b.live {
		if id.Key.Scope == scope && id.Key.ThreadID == threadID {
			delete(b.live, id)
			n++
		}
	}
	if b.scopePurge != nil {
		return *b.scopePurge
	}
	return sandbox.ScopePurge{Disposed: n}
}

// SetAcquireError changes the acquire error mid-test; nil serves again.
func (b *Backend) SetAcquireError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acquireErr = err
}

// SetDisposeFailure changes the dispose failure mid-test; nil disposes cleanly again.
func (b *Backend) SetDisposeFailure(f *sandbox.DisposalFailure) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f != nil {
		c := *f
		f = &c
	}
	b.disposeFailure = f
}

// Acquires returns the recorded Acquire calls, oldest first, failed ones included.
func (b *Backend) Acquires() []Acquisition {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.acquires)
	for i := range out {
		out[i].Spec = out[i].Spec.Clone()
	}
	return out
}

// Disposals returns the recorded Dispose calls, oldest first.
func (b *Backend) Disposals() []Disposal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.disposals)
}

// ScopeDisposals returns the recorded DisposeScope calls, oldest first.
func (b *Backend) ScopeDisposals() []ScopeDisposal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.scopeDisposals)
}

// Live lists the sandbox identities acquired and not yet disposed, sorted by key and kind.
func (b *Backend) Live() []sandbox.SandboxID {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]sandbox.SandboxID, 0, len(b.live))
	for id := range b.live {
		out = append(out, id)
	}
	slices.SortFunc(out, func(x, y sandbox.SandboxID) int {
		if c := strings.Compare(x.Key.String(), y.Key.String()); c != 0 {
			return c
		}
		return strings.Compare(x.Kind, y.Kind)
	})
	return out
}
