package docker

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Snapshotting is the seam a sandbox's sleep and its snapshots need beyond [Containers] and
// [Fingerprinting] (whose Changes lists what a container changed): stopping a workload whose
// processes need not be kept, streaming a path out as the daemon's tar, and the images a
// snapshot is restored through. It is separate from [Containers] (nothing in the serving path
// needs it); [Engine] implements it, and a consumer type-asserts for it, taking a driver
// without it (a fake) as one that cannot stop an idle sandbox or keep snapshots. Every method binds
// first and fails as [Containers]'s methods do ([ErrUnreachable], [ErrTimeout], the context's
// error, [*CommandError]).
type Snapshotting interface {
	// Stop stops the container target, running or paused: its processes get SIGTERM and are
	// killed after grace (zero kills them at once); its filesystem stays. [ErrNotFound] when
	// it is absent; a container already stopped is no error.
	Stop(ctx context.Context, target string, grace time.Duration) error
	// Archive streams guestPath out of the container target as the daemon tars it (the
	// archive GET: the path's last component not followed, its entries named from its base
	// name down). Only ctx bounds the stream; the caller reads and closes it. [ErrNotFound]
	// when the container or the path is absent.
	Archive(ctx context.Context, target, guestPath string) (io.ReadCloser, error)
	// ImageConfig reads a local image: its ID, its layers' diff IDs and its configuration.
	// [ErrNotFound] when it is not present (nothing is pulled).
	ImageConfig(ctx context.Context, ref string) (ImageConfig, error)
	// LoadImage loads the image archive r reads (`docker load`: a manifest.json, image
	// configurations and the layers the daemon does not already hold) and returns the IDs of
	// the images it loaded. The daemon unpacks nothing before r ends: an archive cut short
	// loads nothing. Only ctx bounds it.
	LoadImage(ctx context.Context, r io.Reader) ([]string, error)
	// RemoveImage removes the image with this ID, never forced and never its parents:
	// [Removed], [Absent] when there was none, [ErrConflict] while a container uses it.
	RemoveImage(ctx context.Context, id string) (RemoveOutcome, error)
}

// ImageConfig is what a snapshot needs of its image: the ID (sha256:<64 hex>), the platform,
// the layers' diff IDs in order, and the configuration a container of it starts with, as the
// daemon answers it (the image JSON's "config").
type ImageConfig struct {
	ID           string
	OS           string
	Architecture string
	Variant      string
	DiffIDs      []string
	Config       json.RawMessage
}
