package itest

import (
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// Main runs an integration package's tests; call it from TestMain. It runs them under
// [dockertest.Main]: the busybox image built first, and whatever still carries this process's
// test labels swept afterwards.
func Main(m *testing.M) { dockertest.Main(m) }
