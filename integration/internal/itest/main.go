package itest

import (
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// Main runs an integration package's tests; call it from TestMain. On the CLI driver's pass
// it narrows the run to [DriverLevel] (a package that holds none of them runs nothing), then
// it runs the tests under [dockertest.Main]: the busybox image built first, and whatever
// still carries this process's test labels swept afterwards.
func Main(m *testing.M) {
	onlyDriverLevelOnTheCLI()
	dockertest.Main(m)
}
