package sandbox

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// SnapshotHolds says exactly what a snapshot of a backend declaring [SnapshotFiles] holds, and
// what it does not.
const SnapshotHolds = "the sandbox's filesystem as it was, as the changes against its image " +
	"(files with their bytes, directories, symbolic and hard links, device nodes, owners, modes, " +
	"extended attributes, and deletions), with the image's digest; never its memory, its " +
	"processes or their state, its mounts or its network"

// SnapshotInfo describes one snapshot of a sandbox's filesystem ([SnapshotHolds]).
type SnapshotInfo struct {
	ID         string    // 32 lower-case hex digits ([CheckSnapshotID])
	Key        Key       // the sandbox it was taken of
	Kind       string    // that sandbox's kind
	Backend    string    // the backend that took it
	InstanceID string    // the instance it was taken of
	Image      string    // the digest of the image it is relative to (sha256:<64 hex>)
	Layer      string    // the digest of its layer: the changes, as a tar archive (sha256:<64 hex>)
	Bytes      int64     // the layer's size
	Entries    int       // entries in the layer, deletions included
	Created    time.Time // when it was taken
	Reason     string    // why it was taken (ReasonCall, ReasonOperator)
}

var snapshotID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// CheckSnapshotID refuses anything but a snapshot ID's form (32 lower-case hex digits) with
// [*InvalidArgumentError]: an ID may name a file or an object, so nothing else reaches a store.
func CheckSnapshotID(id string) error {
	if !snapshotID.MatchString(id) {
		return &InvalidArgumentError{Reason: fmt.Sprintf("%q is not a snapshot ID (32 lower-case hex digits)", truncate(id, 80))}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Snapshottable is implemented by sandboxes whose backend declares [SnapshotFiles]: Snapshot
// records the sandbox's filesystem now ([SnapshotHolds]), reported with the context's
// [ActReason]. The sandbox keeps running (a running one is frozen while it is read).
type Snapshottable interface {
	Snapshot(ctx context.Context) (SnapshotInfo, error)
}

// SnapshotKeeper is implemented by backends that keep snapshots. Restore and Fork need the
// backend to declare [SnapshotFiles] and [Fork]; the router checks both ([Router.Restore],
// [Router.Fork]).
type SnapshotKeeper interface {
	// Restore replaces the sandbox of (key, spec.Kind), if any, with a new instance whose
	// filesystem is the snapshot's: the reference's reset, to a snapshot. The image the
	// snapshot is relative to must be present where the backend runs it
	// ([*ImageMissingError] names its digest).
	Restore(ctx context.Context, key Key, spec Spec, id string) (Sandbox, error)
	// Fork makes one new sandbox for each key, each starting from the snapshot and isolated
	// from its siblings. A key that already has a sandbox of spec.Kind is refused
	// ([*InvalidArgumentError]) before anything is made; a fork that fails part way disposes
	// what it made.
	Fork(ctx context.Context, id string, keys []Key, spec Spec) ([]Sandbox, error)
	// DescribeSnapshot describes one snapshot; [*SnapshotNotFoundError] when there is none.
	DescribeSnapshot(ctx context.Context, id string) (SnapshotInfo, error)
	// Snapshots lists the snapshots of one conversation (scope and thread), newest first.
	Snapshots(ctx context.Context, scope, threadID string) ([]SnapshotInfo, error)
	// DeleteSnapshot removes a snapshot; absent is success. Sandboxes restored or forked
	// from it keep their files.
	DeleteSnapshot(ctx context.Context, id string) error
}

// SnapshotNotFoundError says no snapshot has this ID where the backend keeps them.
type SnapshotNotFoundError struct{ ID string }

func (e *SnapshotNotFoundError) Error() string { return fmt.Sprintf("no snapshot %s", e.ID) }

// Is reports the invalid-argument family: the caller named a snapshot that is not there.
func (e *SnapshotNotFoundError) Is(target error) bool { return target == ErrInvalid }

// SnapshotRefusedError says a snapshot cannot be taken or restored as it is: Path names the
// entry (guest text, quoted) and Reason why. Taking one refuses what a snapshot cannot hold
// faithfully (a guest file named like a layer's deletion marker); restoring one refuses a
// layer that would not restore as the same things inside the new sandbox alone (a name that
// climbs out, an entry beneath a link, a hard link to something the layer does not hold).
type SnapshotRefusedError struct {
	ID     string
	Path   string
	Reason string
}

func (e *SnapshotRefusedError) Error() string {
	msg := "snapshot refused: " + e.Reason
	if e.Path != "" {
		msg += fmt.Sprintf(" (%q)", truncate(e.Path, 200))
	}
	return msg
}

// Is reports the refused family.
func (e *SnapshotRefusedError) Is(target error) bool { return target == ErrRefused }

// SnapshotTaken is a snapshot taken.
type SnapshotTaken struct {
	Act
	Snapshot SnapshotInfo
}

// SandboxRestored is a sandbox put back to a snapshot: a new instance (Act.InstanceID) in its
// place.
type SandboxRestored struct {
	Act
	Snapshot string
	Replaced string // the instance it replaced; "" when the key had none
	Reason   string
}

// SandboxForked is one snapshot forked into new sandboxes (Act.Key names their conversation).
type SandboxForked struct {
	Act
	Snapshot  string
	Keys      []Key
	Instances []string // in the order of Keys
	Reason    string
}

// SnapshotTaken does nothing.
func (NopObserver) SnapshotTaken(context.Context, SnapshotTaken) {}

// SandboxRestored does nothing.
func (NopObserver) SandboxRestored(context.Context, SandboxRestored) {}

// SandboxForked does nothing.
func (NopObserver) SandboxForked(context.Context, SandboxForked) {}
