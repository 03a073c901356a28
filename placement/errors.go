package placement

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotOwner is matched (errors.Is) by [*HeldError] and [*LostError]: this engine does not own
// the sandbox.
var ErrNotOwner = errors.New("placement: not the owner")

// HeldError is a claim refused because another engine holds an unexpired lease.
type HeldError struct {
	Entry   string    // the bucket key
	Owner   string    // the engine that holds it
	Expires time.Time // when its lease lapses unless renewed
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("placement: %s is held by engine %s until %s", e.Entry, e.Owner, e.Expires.Format(time.RFC3339Nano))
}

// Is matches [ErrNotOwner].
func (e *HeldError) Is(target error) bool { return target == ErrNotOwner }

// LostError is a renewal or release refused because the entry is no longer the lease's: it
// was taken over or deleted since.
type LostError struct {
	Entry    string
	Revision uint64 // the lease's revision
	Reason   string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("placement: lease on %s at revision %d is lost: %s", e.Entry, e.Revision, e.Reason)
}

// Is matches [ErrNotOwner].
func (e *LostError) Is(target error) bool { return target == ErrNotOwner }
