package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func newSink(t *testing.T, root string, opts ...sandbox.SinkOption) *sandbox.OutputSink {
	t.Helper()
	sink, err := sandbox.FileSystemSink(root, opts...)
	if err != nil {
		t.Fatalf("FileSystemSink(%q): %v", root, err)
	}
	return sink
}

func deliver(t *testing.T, sink *sandbox.OutputSink, name string, content []byte) (sandbox.LandedArtifact, error) {
	t.Helper()
	return sink.Deliver(context.Background(), sandbox.Artifact{Name: name, Content: content, Kind: "k", MediaType: "text/plain"})
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return b
}

func TestFileSystemSinkLandsBytesExactly(t *testing.T) {
	root := t.TempDir()
	sink := newSink(t, root)
	if sink.Normalization != sandbox.NormalizeNFC {
		t.Fatalf("Normalization = %q, want the nfc default", sink.Normalization)
	}
	content := []byte("line one\r\nline two\n\x00\xff binary tail")
	got, err := deliver(t, sink, "out/deep/report.bin", content)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	want := filepath.Join(root, "out", "deep", "report.bin")
	if got.Handle == nil || *got.Handle != want {
		t.Fatalf("Handle = %v, want %q", got.Handle, want)
	}
	if got.Name != "out/deep/report.bin" {
		t.Fatalf("Name = %q", got.Name)
	}
	if wantDisplay := "out/deep/report.bin (" + strconv.Itoa(len(content)) + " bytes)"; got.Display != wantDisplay {
		t.Fatalf("Display = %q, want %q", got.Display, wantDisplay)
	}
	if b := readFile(t, want); !bytes.Equal(b, content) {
		t.Fatalf("landed %q, want %q", b, content)
	}
	// An empty artifact lands as an empty file.
	got, err = deliver(t, sink, "empty", nil)
	if err != nil {
		t.Fatalf("Deliver empty: %v", err)
	}
	if got.Display != "empty (0 bytes)" || len(readFile(t, *got.Handle)) != 0 {
		t.Fatalf("empty artifact landed as %+v", got)
	}
}

func TestFileSystemSinkResolvesRootThroughALink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "root-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	sink := newSink(t, link)
	got, err := deliver(t, sink, "a.txt", []byte("x"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	realResolved, _ := filepath.EvalSymlinks(real)
	if want := filepath.Join(realResolved, "a.txt"); *got.Handle != want {
		t.Fatalf("Handle = %q, want the resolved %q", *got.Handle, want)
	}
}

func TestFileSystemSinkConstruction(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		root    string
		opts    []sandbox.SinkOption
		wantErr error
	}{
		{"empty root", "", nil, sandbox.ErrInvalid},
		{"missing root", filepath.Join(dir, "missing"), nil, os.ErrNotExist},
		{"root is a file", file, nil, sandbox.ErrInvalid},
		{"nil display", dir, []sandbox.SinkOption{sandbox.WithDisplay(nil)}, sandbox.ErrInvalid},
		{"unknown normalization", dir, []sandbox.SinkOption{sandbox.WithNameNormalization("nfd")}, sandbox.ErrInvalid},
		{"nil option skipped", dir, []sandbox.SinkOption{nil}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sandbox.FileSystemSink(tc.root, tc.opts...)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("FileSystemSink: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("FileSystemSink = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestFileSystemSinkOptions(t *testing.T) {
	sink := newSink(t, t.TempDir(),
		sandbox.WithDisplay(func(a sandbox.Artifact) string { return "landed " + a.Name + " as " + a.MediaType }),
		sandbox.WithNameNormalization(sandbox.NormalizeNone))
	if sink.Normalization != sandbox.NormalizeNone {
		t.Fatalf("Normalization = %q, want none", sink.Normalization)
	}
	got, err := deliver(t, sink, "a.txt", []byte("x"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got.Display != "landed a.txt as text/plain" {
		t.Fatalf("Display = %q", got.Display)
	}
}

func TestFileSystemSinkExistingDestination(t *testing.T) {
	root := t.TempDir()
	dest := filepath.Join(root, "a.txt")
	if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := deliver(t, newSink(t, root), "a.txt", []byte("new"))
	var exists *sandbox.LandingExistsError
	if !errors.As(err, &exists) || exists.Name != "a.txt" {
		t.Fatalf("Deliver over an existing file = %v, want *LandingExistsError", err)
	}
	if b := readFile(t, dest); string(b) != "old" {
		t.Fatalf("the refused delivery changed the file to %q", b)
	}

	if _, err := deliver(t, newSink(t, root, sandbox.WithReplaceExisting()), "a.txt", []byte("new")); err != nil {
		t.Fatalf("Deliver with replace: %v", err)
	}
	if b := readFile(t, dest); string(b) != "new" {
		t.Fatalf("replaced file holds %q, want new", b)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Fatalf("replace left %d entries behind, want 1", len(entries))
	}

	// A directory of that name is never replaced.
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := deliver(t, newSink(t, root), "d", []byte("x")); !errors.As(err, &exists) {
		t.Fatalf("Deliver over a directory = %v, want *LandingExistsError", err)
	}
	if _, err = deliver(t, newSink(t, root, sandbox.WithReplaceExisting()), "d", []byte("x")); !errors.As(err, &exists) {
		t.Fatalf("replacing a directory = %v, want *LandingExistsError", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 2 {
		t.Fatalf("the refused replace left a temporary file behind: %v", entries)
	}

	// A name as long as allowed can still be replaced: the temporary name does not grow with it.
	long := strings.Repeat("n", sandbox.MaxArtifactNameBytes)
	replacing := newSink(t, root, sandbox.WithReplaceExisting())
	for _, content := range []string{"first", "second"} {
		if _, err := deliver(t, replacing, long, []byte(content)); err != nil {
			t.Fatalf("Deliver a %d-byte name: %v", len(long), err)
		}
	}
	if b := readFile(t, filepath.Join(root, long)); string(b) != "second" {
		t.Fatalf("long name holds %q, want second", b)
	}
}

// The sink's attack: a link planted inside root that leads out. Nothing may be written through
// it, neither the file nor any parent directory, and the error names only the artifact.
func TestFileSystemSinkRefusesLinksOutOfRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "inner")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plant := func(target, link string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	plant(outside, "escape")                  // absolute link out
	plant("../outside", "relative-escape")    // relative link out
	plant(filepath.Join(root, "inner"), "in") // absolute link that stays inside
	plant("inner", "relative-in")             // relative link that stays inside
	plant(filepath.Join(base, "nowhere"), "dangling")
	if err := os.Symlink(filepath.Join(root, "escape"), filepath.Join(root, "inner", "chain")); err != nil {
		t.Fatal(err)
	}
	plant(filepath.Join(outside, "victim.txt"), "leaf-link")

	sink := newSink(t, root)
	refused := []string{
		"escape/secret.txt",
		"escape/new/dir/secret.txt",
		"relative-escape/secret.txt",
		"in/chain/secret.txt",
		"dangling/secret.txt",
		"../outside/secret.txt",
		"/etc/secret.txt",
		`inner\..\..\outside\secret.txt`,
	}
	for _, name := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := deliver(t, sink, name, []byte("secret"))
			var notConfined *sandbox.LandingNotConfinedError
			if !errors.As(err, &notConfined) {
				t.Fatalf("Deliver(%q) = %v, want *LandingNotConfinedError", name, err)
			}
			if notConfined.Name != name {
				t.Fatalf("error names %q, want the artifact %q", notConfined.Name, name)
			}
			if msg := err.Error(); strings.Contains(msg, base) {
				t.Fatalf("message %q leaks a host path", msg)
			}
		})
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("something was written outside root: %v", entries)
	}

	// Links that stay inside root are followed.
	for _, name := range []string{"in/a.txt", "relative-in/b.txt", "in/sub/c.txt"} {
		got, err := deliver(t, sink, name, []byte("ok"))
		if err != nil {
			t.Fatalf("Deliver(%q) through an inside link: %v", name, err)
		}
		if !strings.HasPrefix(*got.Handle, root+string(filepath.Separator)) {
			t.Fatalf("handle %q is not below root", *got.Handle)
		}
	}
	if b := readFile(t, filepath.Join(root, "inner", "sub", "c.txt")); string(b) != "ok" {
		t.Fatalf("inside link target holds %q", b)
	}

	// A link at the destination itself is never followed: without replace it exists, with
	// replace the link is replaced by the file.
	var exists *sandbox.LandingExistsError
	if _, err := deliver(t, sink, "leaf-link", []byte("secret")); !errors.As(err, &exists) {
		t.Fatalf("Deliver onto a planted link = %v, want *LandingExistsError", err)
	}
	if _, err := deliver(t, newSink(t, root, sandbox.WithReplaceExisting()), "leaf-link", []byte("mine")); err != nil {
		t.Fatalf("Deliver with replace onto a planted link: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "leaf-link")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("leaf-link after replace: %v, %v; want a regular file", fi, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "victim.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the link's target was written: %v", err)
	}
}

func TestFileSystemSinkRefusals(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "plain"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := newSink(t, root)
	cases := []struct {
		name    string
		artName string
		as      func(error) bool
	}{
		{"invalid name", "a//b", asError[*sandbox.ArtifactNameInvalidError]},
		{"empty name", "", asError[*sandbox.ArtifactNameInvalidError]},
		{"control character", "a\nb", asError[*sandbox.ArtifactNameInvalidError]},
		{"file as a parent", "plain/deeper.txt", asError[*sandbox.NotDirectoryError]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deliver(t, sink, tc.artName, []byte("x"))
			if !tc.as(err) {
				t.Fatalf("Deliver(%q) = %v (%T)", tc.artName, err, err)
			}
			if strings.Contains(err.Error(), root) {
				t.Fatalf("message %q leaks a host path", err)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := sink.Deliver(ctx, sandbox.Artifact{Name: "late.txt"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Deliver with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(root, "late.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a cancelled delivery wrote its file: %v", err)
	}
}

// A permission error names no host path. Root ignores directory permissions, and CI runs as
// root, so there the test runs itself again in a child with the nobody account's credentials.
func TestFileSystemSinkHidesHostPathsInOSErrors(t *testing.T) {
	if os.Geteuid() == 0 {
		runAsNobody(t)
		return
	}
	root := t.TempDir()
	locked := filepath.Join(root, "locked")
	if err := os.Mkdir(locked, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
	_, err := deliver(t, newSink(t, root), "locked/a.txt", []byte("x"))
	if !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Deliver into a read-only directory = %v, want a permission error", err)
	}
	if strings.Contains(err.Error(), root) {
		t.Fatalf("message %q leaks a host path", err)
	}
}

func asError[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

// An OS-level failure below root comes back wrapped for the artifact, naming no host path.
// /proc refuses new directories even to root, which the permission test cannot rely on.
func TestFileSystemSinkOSErrorsNameNoHostPath(t *testing.T) {
	if fi, err := os.Stat("/proc/self"); err != nil || !fi.IsDir() {
		t.Skip("no /proc on this host")
	}
	_, err := deliver(t, newSink(t, "/proc"), "maf-sandbox-probe/x", []byte("x"))
	if err == nil {
		t.Fatal("Deliver below /proc succeeded")
	}
	if asError[*sandbox.LandingNotConfinedError](err) || asError[*sandbox.LandingExistsError](err) {
		t.Fatalf("Deliver below /proc = %v, want a plain OS error", err)
	}
	if !strings.HasPrefix(err.Error(), `land artifact "maf-sandbox-probe/x": `) || strings.Contains(err.Error(), "/proc") {
		t.Fatalf("message %q should name the artifact and no host path", err)
	}
}
