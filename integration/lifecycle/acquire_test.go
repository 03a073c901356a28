package lifecycle

import (
	"bytes"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestAcquireExecFilesDispose runs a sandbox's life once on each file plane: acquire, exec,
// write, stat, read, remove, warm reuse and dispose.
func TestAcquireExecFilesDispose(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		key := itest.NewKey(t)
		spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete))
		sb := itest.Acquire(t, b, key, spec)
		ctx := itest.Context(t)

		res, err := sb.Exec(ctx, sandbox.Shell("pwd; echo err >&2; exit 3"), ".", 30*time.Second)
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		if res.ExitCode != 3 || res.Stdout() != "/maf-sandbox/work\n" || res.Stderr() != "err\n" {
			t.Fatalf("exec result = %d %q %q", res.ExitCode, res.Stdout(), res.Stderr())
		}
		content := []byte("hello\x00\xff world\r\n")
		if err := sb.WriteFile(ctx, "out/deep/a.bin", content, "."); err != nil {
			t.Fatalf("write: %v", err)
		}
		st, err := sb.StatFile(ctx, "out/deep/a.bin", ".")
		if err != nil || st == nil || st.Kind != sandbox.EntryFile || *st.Size != int64(len(content)) || st.Path != "out/deep/a.bin" {
			t.Fatalf("stat = %+v, %v", st, err)
		}
		got, err := sb.ReadFile(ctx, "out/deep/a.bin", ".", 1024)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("read = %q, %v", got, err)
		}
		if err := sb.Remove(ctx, "out", ".", true); err != nil {
			t.Fatalf("remove: %v", err)
		}
		if st, err := sb.StatFile(ctx, "out", "."); err != nil || st != nil {
			t.Fatalf("stat after remove = %+v, %v", st, err)
		}
		again := itest.Acquire(t, b, key, spec)
		if again.InstanceID() != sb.InstanceID() {
			t.Fatalf("warm acquire gave a new instance")
		}
		if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("dispose: %v", f)
		}
	})
}
