package files

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestSymlinkedParentWording: a write through a parent that is a link is refused as not
// confined, on every file plane, in words that say the component is not a real directory
// (what the reference implementation's hosts match on).
func TestSymlinkedParentWording(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn)))
		if res, err := sb.Exec(itest.Context(t), sandbox.Shell("ln -s /etc linked"), ".", 30*time.Second); err != nil || res.ExitCode != 0 {
			t.Fatalf("plant the link: %+v, %v", res, err)
		}
		err := sb.WriteFile(itest.Context(t), "linked/x", []byte("x"), ".")
		var nc *sandbox.NotConfinedError
		if !errors.As(err, &nc) || !strings.Contains(err.Error(), "is a link, not a real directory") {
			t.Fatalf("write through a linked parent = %v, want not confined: a link, not a real directory", err)
		}
	})
}
