package paths

import (
	"errors"

	"github.com/mafsandbox/engine/sandbox"
)

// ErrTarHeader is returned, wrapped with the reason, for a block that is not a well-formed tar
// header.
var ErrTarHeader = errors.New("paths: malformed tar header")

// notConfined builds the confinement refusal every function here returns.
func notConfined(p, wd, reason string) error {
	return &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: reason}
}
