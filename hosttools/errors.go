package hosttools

import (
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/sandbox"
)

// ErrSealed is wrapped by the [*RegistrationError] a sealed registry returns: Aggregate and
// NewRun seal a registry, so its tools cannot change under a spec that already carries them.
var ErrSealed = errors.New("hosttools: the registry is sealed")

// RegistrationError refuses a tool at registration: an empty or duplicate name, no function,
// a sealed registry. Undeclared tools and identities outside the allowed set are refused with
// [*sandbox.HostToolNotDeclaredError] and [*sandbox.HostToolIdentityNotAllowedError]. All of
// them are in the [sandbox.ErrInvalid] family.
type RegistrationError struct {
	Tool   string
	Reason string
	Err    error // ErrSealed, or nil
}

func (e *RegistrationError) Error() string {
	return fmt.Sprintf("hosttools: register %q: %s", e.Tool, e.Reason)
}

// Is reports the invalid-argument family.
func (e *RegistrationError) Is(target error) bool { return target == sandbox.ErrInvalid }

// Unwrap returns ErrSealed for a sealed registry.
func (e *RegistrationError) Unwrap() error { return e.Err }

// ErrNoReceipt says the launcher exited 0 without printing its "process-v1 <pid> <pgid>"
// receipt. The host then writes no start gate, so the program never starts.
var ErrNoReceipt = errors.New("hosttools: the launcher printed no process-v1 receipt; the program was not started")
