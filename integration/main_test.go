package integration

import (
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
)

func TestMain(m *testing.M) { dockertest.Main(m) }
