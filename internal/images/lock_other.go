//go:build !unix

package images

import "context"

// exclusive runs fn. Without flock there is no machine-wide lock: processes that ensure the
// same image at once may each build it, and the last tag wins.
func exclusive(_ context.Context, _ string, fn func() error) error { return fn() }
