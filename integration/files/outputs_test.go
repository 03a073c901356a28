package files

import (
	"context"
	"errors"
	"github.com/mafsandbox/engine/actors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// Declared outputs are collected through the router onto a host sink; a missing required one
// and an oversized one are refused before anything lands.
func TestCollectOutputsThroughTheRouter(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
		if err != nil {
			t.Fatal(err)
		}
		key := itest.NewKey(t)
		optional := sandbox.Output("out/maybe.txt")
		optional.Required = false
		spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut),
			sandbox.WithDeclaredOutputs(sandbox.Output("out/report.txt"), optional),
			sandbox.WithFilesOut(sandbox.TransferLimits{MaxBytesPerFile: 1 << 20, MaxTotalBytes: 2 << 20, MaxFiles: 4}))
		t.Cleanup(func() { router.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
		ctx := itest.Context(t)
		sb, err := router.Acquire(ctx, key, spec)
		if err != nil {
			t.Fatal(err)
		}
		itest.Sh(t, sb, "mkdir -p /maf-sandbox/work/out && printf 'report\\377' > /maf-sandbox/work/out/report.txt")
		root := t.TempDir()
		sink, err := sandbox.FileSystemSink(root)
		if err != nil {
			t.Fatal(err)
		}
		landed, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil)
		if err != nil || len(landed) != 1 {
			t.Fatalf("collect = %+v, %v", landed, err)
		}
		if got, err := os.ReadFile(filepath.Join(root, "out/report.txt")); err != nil || string(got) != "report\xff" {
			t.Fatalf("landed %q, %v", got, err)
		}
		itest.Sh(t, sb, "rm /maf-sandbox/work/out/report.txt")
		if _, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil); !errors.As(err, new(*sandbox.OutputMissingError)) {
			t.Fatalf("missing required output = %v", err)
		}
		itest.Sh(t, sb, "dd if=/dev/zero of=/maf-sandbox/work/out/report.txt bs=1048576 count=2 2>/dev/null")
		if _, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil); !errors.As(err, new(*sandbox.TransferCapExceededError)) {
			t.Fatalf("oversized output = %v", err)
		}
		itest.Sh(t, sb, "rm /maf-sandbox/work/out/report.txt && ln -s /etc/passwd /maf-sandbox/work/out/report.txt")
		if _, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil); !errors.As(err, new(*sandbox.OutputNotRegularError)) {
			t.Fatalf("linked output = %v", err)
		}
	})
}

// A second backend, with no memory of what the first made, purges a conversation by label.
func TestDisposeScopeFromAFreshBackend(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	for _, kind := range []string{"one", "two"} {
		spec, err := sandbox.NewSpec(kind, sandbox.WithImage(dockertest.Busybox(t)), sandbox.WithRequires(sandbox.Exec))
		if err != nil {
			t.Fatal(err)
		}
		itest.Acquire(t, b, key, spec)
	}
	other := itest.NewKey(t)
	itest.Acquire(t, b, other, itest.FilesSpec(t))

	fresh := itest.NewBackend(t)
	p := fresh.DisposeScope(context.Background(), key.Scope, key.ThreadID)
	if p.Disposed != 2 || p.Undisposed != nil {
		t.Fatalf("purge = %+v, want 2 disposed", p)
	}
	out := dockertest.Docker(t, "ps", "-a", "--format", "{{.Names}}", "--filter", "label=maf-sandbox.scope="+other.Scope)
	if strings.TrimSpace(out) == "" {
		t.Fatal("the purge took another conversation's sandbox")
	}
	if p := fresh.DisposeScope(context.Background(), key.Scope, key.ThreadID); p.Disposed != 0 || p.Undisposed != nil {
		t.Fatalf("second purge = %+v", p)
	}
}
