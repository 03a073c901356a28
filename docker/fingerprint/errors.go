package fingerprint

import (
	"errors"

	"github.com/mafsandbox/engine/sandbox"
)

// ErrLimit is an observation that went over one of its bounds (file bytes, entries, output);
// it comes wrapped in an [*UnreadableError].
var ErrLimit = errors.New("fingerprint: measurement bound exceeded")

// RefusedError is a workload the fingerprint will not vouch for: a dirty baseline, a
// writable declared mount, a shared PID namespace, a privileged or replaced container. It is
// in the [sandbox.ErrRefused] family.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "fingerprint refused: " + e.Reason }

// Is reports the refusal family.
func (e *RefusedError) Is(target error) bool { return target == sandbox.ErrRefused }

// UnreadableError is a measurement that could not be read. What names it; Err is why.
type UnreadableError struct {
	What string
	Err  error
}

func (e *UnreadableError) Error() string {
	return "fingerprint: could not read " + e.What + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *UnreadableError) Unwrap() error { return e.Err }
