package files

import (
	"errors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestPerFileCeilingInTheBackend: the 64 MiB a file the backend declares binds an embedded
// caller too. A write one byte over is refused before any engine call; a read of a file one
// byte over is refused on its archive header whatever maxBytes the caller allowed, and the
// engine was never asked for more than the ceiling.
func TestPerFileCeilingInTheBackend(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b, eng := itest.NewCountingBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)))
		ctx := itest.Context(t)
		over := int64(actors.MaxBytesPerFile + 1)
		wantCap := func(t *testing.T, err error) {
			t.Helper()
			var capErr *sandbox.TransferCapExceededError
			if !errors.As(err, &capErr) || capErr.Cap != "per-file cap" || capErr.Limit != actors.MaxBytesPerFile || capErr.Actual != over {
				t.Fatalf("err = %T %v, want the per-file cap of %d refusing %d bytes", err, err, int64(actors.MaxBytesPerFile), over)
			}
		}

		t.Run("write", func(t *testing.T) {
			eng.Reset()
			wantCap(t, sb.WriteFile(ctx, "big", make([]byte, over), "."))
			if calls := eng.Seen(); len(calls) != 0 {
				t.Fatalf("the refusal came after engine calls %v", calls)
			}
			if st, err := sb.StatFile(ctx, "big", "."); err != nil || st != nil {
				t.Fatalf("stat big = %v, %v; want absent", st, err)
			}
		})
		t.Run("read", func(t *testing.T) {
			if res, err := sb.Exec(ctx, sandbox.Shell("head -c 67108865 /dev/zero > big"), ".", time.Minute); err != nil || res.ExitCode != 0 {
				t.Fatalf("make big: %v %q", err, res.Stderr())
			}
			eng.Reset()
			content, err := sb.ReadFile(ctx, "big", ".", 1<<30)
			wantCap(t, err)
			if content != nil {
				t.Fatalf("read returned %d bytes with the refusal", len(content))
			}
			if eng.ReadCap > actors.MaxBytesPerFile {
				t.Fatalf("the engine was asked to read up to %d bytes, above the ceiling", eng.ReadCap)
			}
		})
		t.Run("read within the caller's cap", func(t *testing.T) {
			var capErr *sandbox.TransferCapExceededError
			if _, err := sb.ReadFile(ctx, "big", ".", 1024); !errors.As(err, &capErr) || capErr.Cap != "max bytes" || capErr.Limit != 1024 {
				t.Fatalf("err = %v, want the caller's max bytes of 1024", err)
			}
		})
	})
}
