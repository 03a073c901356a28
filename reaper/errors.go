package reaper

import "errors"

// ErrInvalid is returned by [Reap] for an argument refused before any engine call: a
// non-positive age, an empty scope, a nil inventory, or a failing option.
var ErrInvalid = errors.New("reaper: invalid argument")
