package service

import (
	"context"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// Reaper sweeps sandboxes by age (egress-and-reap spec §4). The Docker backend does not
// offer one yet; [WithReaper] installs one, and without it reap requests fail with an
// [*sandbox.UnsupportedError].
type Reaper interface {
	// Reap removes the sandboxes created more than olderThan ago, on every scope or only
	// scope. Its error is only for an invalid argument or a cancelled ctx; operational
	// problems are in the result's Failures.
	Reap(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error)
}

// ReaperFunc adapts a function to [Reaper].
type ReaperFunc func(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error)

// Reap calls f.
func (f ReaperFunc) Reap(ctx context.Context, olderThan time.Duration, scope string) (sandbox.ReapResult, error) {
	return f(ctx, olderThan, scope)
}
