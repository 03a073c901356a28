package hostfs

import (
	"errors"
	"fmt"
)

// ErrStale is the answer of a [Root] whose process has ended (the container stopped or
// restarted): nothing is resolved any more, and the caller proves the new process again or
// uses another plane.
var ErrStale = errors.New("hostfs: the container's process is gone")

// ErrUnavailable says the host plane cannot serve this container at all (not root, no
// openat2, a remote or remapped daemon); the caller uses the archive plane.
var ErrUnavailable = errors.New("hostfs: host file plane unavailable")

// NotProvenError says a process could not be proven to be the container's: the plane
// refuses to touch it.
type NotProvenError struct {
	ContainerID string
	Pid         int
	Reason      string
}

func (e *NotProvenError) Error() string {
	return fmt.Sprintf("hostfs: process %d is not proven to be container %.12s's: %s", e.Pid, e.ContainerID, e.Reason)
}

// Unwrap makes a failed proof match [ErrUnavailable]: the caller falls back.
func (e *NotProvenError) Unwrap() error { return ErrUnavailable }
