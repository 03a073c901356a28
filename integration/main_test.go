package integration

import (
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestMain(m *testing.M) {
	onlyDriverLevelOnTheCLI()
	dockertest.Main(m)
}
