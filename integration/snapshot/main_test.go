package snapshot

import (
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
)

func TestMain(m *testing.M) { itest.Main(m) }
