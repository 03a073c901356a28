package images

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A binary built with a plain go build finds the engine's source from any working directory,
// not only inside the tree, and builds the exec channel's supervisor from it: the static ELF
// program `make engine` would have embedded.
func TestGoBuildOutsideTheSourceTree(t *testing.T) {
	want, err := moduleRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	root, err := sourceRoot(t.Context())
	if err != nil || root != want {
		t.Fatalf("sourceRoot from outside the tree = %q, %v; want %q", root, err, want)
	}
	out := filepath.Join(t.TempDir(), execdBinary)
	if err := goBuild(t.Context(), execdMain, "linux", runtime.GOARCH, out); err != nil {
		t.Fatalf("build the supervisor from outside the tree: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Fatalf("built %d bytes, %v; want an ELF program", len(b), err)
	}
}

// A working directory inside another module is not taken for the engine's source.
func TestSourceRootSkipsAnotherModule(t *testing.T) {
	want := compiledRoot()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if root, err := sourceRoot(t.Context()); err != nil || root != want {
		t.Fatalf("sourceRoot in another module = %q, %v; want the compiled tree %q", root, err, want)
	}
}

// go install module@version leaves the source where the module cache's path escaping says.
func TestModuleCacheDir(t *testing.T) {
	got := moduleCacheDir("/c", "github.com/MafSandbox/engine", "v1.2.3")
	if want := filepath.FromSlash("/c/github.com/!maf!sandbox/engine@v1.2.3"); got != want {
		t.Fatalf("moduleCacheDir = %q, want %q", got, want)
	}
	if !isEngineModule(compiledRoot()) || isEngineModule(t.TempDir()) {
		t.Fatal("isEngineModule tells the engine's tree from another directory wrongly")
	}
}
