package paths

import "github.com/mafsandbox/engine/sandbox"

// notConfined builds the confinement refusal every function here returns.
func notConfined(p, wd, reason string) error {
	return &sandbox.NotConfinedError{Path: p, WorkDir: wd, Reason: reason}
}
