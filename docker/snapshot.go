package docker

import (
	"context"
	"time"
)

// Snapshotting is the seam a sandbox's sleep and its snapshots need beyond [Engine]: stopping a
// workload whose processes need not be kept. It is separate from [Engine] (nothing in the
// serving path needs it); the API driver implements it, and a consumer type-asserts for it,
// taking a driver without it as one that cannot stop an idle sandbox. Every method binds
// first and fails as [Engine]'s methods do ([ErrUnreachable], [ErrTimeout], the context's
// error, [*CommandError]).
type Snapshotting interface {
	// Stop stops the container target, running or paused: its processes get SIGTERM and are
	// killed after grace (zero kills them at once); its filesystem stays. [ErrNotFound] when
	// it is absent; a container already stopped is no error.
	Stop(ctx context.Context, target string, grace time.Duration) error
}
