package itest

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// CountingEngine is the real engine, counting the calls that touch a
// container (exec, freeze, archive reads and writes) and noting the largest byte cap a read
// asked for, so a test can show a refusal came before any of them.
type CountingEngine struct {
	docker.Driver
	mu      sync.Mutex
	calls   []string
	ReadCap int64
}

func (e *CountingEngine) note(op string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, op)
}

// Reset forgets the calls so far.
func (e *CountingEngine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls, e.ReadCap = nil, 0
}

// Seen returns the calls since the last reset.
func (e *CountingEngine) Seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

func (e *CountingEngine) Exec(ctx context.Context, req docker.ExecRequest) (docker.ExecOutput, error) {
	e.note("exec")
	return e.Driver.Exec(ctx, req)
}

// ExecWithStart counts as an exec.
func (e *CountingEngine) ExecWithStart(ctx context.Context, req docker.ExecRequest, started func()) (docker.ExecOutput, error) {
	e.note("exec")
	return e.Driver.ExecWithStart(ctx, req, started)
}

func (e *CountingEngine) Pause(ctx context.Context, target string) error {
	e.note("pause")
	return e.Driver.Pause(ctx, target)
}

func (e *CountingEngine) Stat(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	e.note("stat")
	return e.Driver.Stat(ctx, target, guestPath)
}

// StatType counts as a stat.
func (e *CountingEngine) StatType(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	e.note("stat")
	return e.Driver.StatType(ctx, target, guestPath)
}

func (e *CountingEngine) Read(ctx context.Context, target, guestPath string, maxBytes int64) (*docker.Entry, []byte, error) {
	e.note("read")
	e.mu.Lock()
	e.ReadCap = max(e.ReadCap, maxBytes)
	e.mu.Unlock()
	return e.Driver.Read(ctx, target, guestPath, maxBytes)
}

func (e *CountingEngine) CopyIn(ctx context.Context, target string, tarball []byte) error {
	e.note("copy in")
	return e.Driver.CopyIn(ctx, target, tarball)
}

// NewCountingBackend is [NewBackend] on a counting wrapper of the real engine.
func NewCountingBackend(t testing.TB, opts ...actors.Option) (*actors.Backend, *CountingEngine) {
	t.Helper()
	dockertest.Require(t)
	cfg := docker.Config{Labels: dockertest.Labels()}
	real, err := docker.NewEngine(cfg)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	ce := &CountingEngine{Driver: real}
	return NewBackend(t, append([]actors.Option{actors.WithEngine(ce), actors.WithLogger(zaptest.NewLogger(t))}, opts...)...), ce
}
