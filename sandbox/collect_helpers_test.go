package sandbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// base is where the fake keeps the storage base that wd "." names.
const base = sandboxtest.DefaultStorageBase

// newFake builds a fake sandbox seeded with files (relative to the storage base).
func newFake(t *testing.T, files map[string]string) *sandboxtest.Sandbox {
	t.Helper()
	sb, err := sandboxtest.NewSandbox()
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	for rel, content := range files {
		sb.AddFile(base+"/"+rel, []byte(content))
	}
	return sb
}

// newSpec builds a spec of kind "report" with opts applied.
func newSpec(t *testing.T, opts ...sandbox.SpecOption) sandbox.Spec {
	t.Helper()
	spec, err := sandbox.NewSpec("report", opts...)
	if err != nil {
		t.Fatalf("NewSpec: %v", err)
	}
	return spec
}

// land declares a required landing output; consume a required consumed one.
func land(p string) sandbox.DeclaredOutput { return sandbox.Output(p) }

func consume(p string) sandbox.DeclaredOutput {
	o := sandbox.Output(p)
	o.Disposition = sandbox.DispositionConsume
	return o
}

func named(o sandbox.DeclaredOutput, name string) sandbox.DeclaredOutput {
	o.Name = &name
	return o
}

func optional(o sandbox.DeclaredOutput) sandbox.DeclaredOutput {
	o.Required = false
	return o
}

// call is one StatFile or ReadFile seen by a spy.
type call struct {
	Op       string // "stat" or "read"
	Path     string
	WorkDir  string
	MaxBytes int64
}

// spy decorates a sandbox: it records StatFile and ReadFile calls, and lets a test replace
// their answers for chosen paths. Everything else goes to the wrapped sandbox.
type spy struct {
	sandbox.Sandbox
	mu    sync.Mutex
	calls []call
	stat  map[string]func() (*sandbox.FileStat, error)
	read  map[string]func(maxBytes int64) ([]byte, error)
}

func newSpy(sb sandbox.Sandbox) *spy {
	return &spy{Sandbox: sb, stat: map[string]func() (*sandbox.FileStat, error){},
		read: map[string]func(int64) ([]byte, error){}}
}

// fake is the wrapped fake, for seeding.
func (s *spy) fake() *sandboxtest.Sandbox { return s.Sandbox.(*sandboxtest.Sandbox) }

func (s *spy) StatFile(ctx context.Context, p, wd string) (*sandbox.FileStat, error) {
	s.mu.Lock()
	s.calls = append(s.calls, call{Op: "stat", Path: p, WorkDir: wd})
	override := s.stat[p]
	s.mu.Unlock()
	if override != nil {
		return override()
	}
	return s.Sandbox.StatFile(ctx, p, wd)
}

func (s *spy) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	s.mu.Lock()
	s.calls = append(s.calls, call{Op: "read", Path: p, WorkDir: wd, MaxBytes: maxBytes})
	override := s.read[p]
	s.mu.Unlock()
	if override != nil {
		return override(maxBytes)
	}
	return s.Sandbox.ReadFile(ctx, p, wd, maxBytes)
}

func (s *spy) Calls() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.calls...)
}

// recorder is a sink that keeps what it is given. failAt (1-based) makes that delivery fail
// with failErr; onDeliver runs before each delivery.
type recorder struct {
	mu        sync.Mutex
	got       []sandbox.Artifact
	failAt    int
	failErr   error
	onDeliver func()
}

var errSinkRefused = errors.New("sink refused")

func (r *recorder) sink(n sandbox.NameNormalization) *sandbox.OutputSink {
	return &sandbox.OutputSink{Normalization: n, Deliver: func(ctx context.Context, a sandbox.Artifact) (sandbox.LandedArtifact, error) {
		if r.onDeliver != nil {
			r.onDeliver()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.failAt == len(r.got)+1 {
			r.got = append(r.got, a)
			return sandbox.LandedArtifact{}, r.failErr
		}
		r.got = append(r.got, a)
		return sandbox.LandedArtifact{Name: a.Name, Display: a.Name}, nil
	}}
}

func (r *recorder) Artifacts() []sandbox.Artifact {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sandbox.Artifact(nil), r.got...)
}

func ptr[T any](v T) *T { return &v }
