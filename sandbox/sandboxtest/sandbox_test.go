package sandboxtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

var (
	nc = &sandbox.NotConfinedError{}
	nd = &sandbox.NotDirectoryError{}
)

func TestWriteFile(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		p, wd   string
		want    string // where the bytes land; "" when refused
		wantErr error
	}{
		{"a write lands", "out.txt", ".", work + "/out.txt", nil},
		{"a relative working directory resolves beneath the base", "x.txt", "real", work + "/real/x.txt", nil},
		{"an absolute working directory is accepted", "x.txt", work + "/real", work + "/real/x.txt", nil},
		{"parents are created", "deep/er/est/leaf.txt", ".", work + "/deep/er/est/leaf.txt", nil},
		{"a second write replaces", "plain.txt", ".", work + "/plain.txt", nil},
		{"an other entry is replaced", "fifo", ".", work + "/fifo", nil},
		{"a path outside is refused", "../maf-sandbox-outside/x", ".", "", nc},
		{"a path through a linked parent is refused", "link-dir/secret.txt", ".", "", nc},
		{"a linked destination is refused, not followed", "link-file", ".", "", nc},
		{"the working directory is refused", ".", ".", "", nc},
		{"a backslash is refused", `a\b.txt`, ".", "", nc},
		{"a linked working directory", "x.txt", "link-dir", "", nc},
		{"a linked ancestor of the working directory", "x.txt", "link-dir/sub", "", nc},
		{"a plain parent is not a directory", "plain.txt/deeper.txt", ".", "", nd},
		{"a directory is not overwritten", "real", ".", "", sandbox.ErrIsDirectory},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t)
			before := sb.Paths()
			content := []byte("naïve\x00\r\n\x01\x7f")
			err := sb.WriteFile(ctx, tc.p, content, tc.wd)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr != nil {
				if after := sb.Paths(); !slices.Equal(before, after) {
					t.Fatalf("a refused write changed the store: %q -> %q", before, after)
				}
				if got, _ := sb.File(outside + "/secret.txt"); !bytes.Equal(got, secret) {
					t.Fatalf("the link's target changed: %q", got)
				}
				return
			}
			got, ok := sb.File(tc.want)
			if !ok || !bytes.Equal(got, content) {
				t.Fatalf("%s holds %q (present %v), want %q", tc.want, got, ok, content)
			}
		})
	}
}

func TestStatFile(t *testing.T) {
	ctx := context.Background()
	size := func(n int) *int64 { v := int64(n); return &v }
	cases := []struct {
		name     string
		p, wd    string
		want     *sandbox.FileStat
		wantErr  error
		failStat string
	}{
		{"a file has its exact size", "real/inside.txt", ".", &sandbox.FileStat{Path: "real/inside.txt", Kind: sandbox.EntryFile, Size: size(len(inside))}, nil, ""},
		{"an absolute path comes back relative", work + "/real/inside.txt", ".", &sandbox.FileStat{Path: "real/inside.txt", Kind: sandbox.EntryFile, Size: size(len(inside))}, nil, ""},
		{"relative to the working directory used", "inside.txt", "real", &sandbox.FileStat{Path: "inside.txt", Kind: sandbox.EntryFile, Size: size(len(inside))}, nil, ""},
		{"a link is named a link", "link-file", ".", &sandbox.FileStat{Path: "link-file", Kind: sandbox.EntrySymlink}, nil, ""},
		{"a directory", "real", ".", &sandbox.FileStat{Path: "real", Kind: sandbox.EntryDirectory}, nil, ""},
		{"the working directory itself", ".", ".", &sandbox.FileStat{Path: "", Kind: sandbox.EntryDirectory}, nil, ""},
		{"other", "fifo", ".", &sandbox.FileStat{Path: "fifo", Kind: sandbox.EntryOther}, nil, ""},
		{"absent is nil, nil", "missing.txt", ".", nil, nil, ""},
		{"stat through a linked parent", "link-dir/secret.txt", ".", nil, nc, ""},
		{"a linked working directory", "secret.txt", "link-dir", nil, nc, ""},
		{"a linked ancestor of the working directory", "leaf.txt", "link-dir/sub", nil, nc, ""},
		{"a plain parent is not an escape", "plain.txt/deeper.txt", ".", nil, nd, ""},
		{"a provider failure is not absence", "real/inside.txt", ".", nil, errBoom, work + "/real/inside.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t)
			if tc.failStat != "" {
				sb.FailStat(tc.failStat, errBoom)
			}
			got, err := sb.StatFile(ctx, tc.p, tc.wd)
			checkErr(t, err, tc.wantErr)
			if !sameStat(got, tc.want) {
				t.Fatalf("StatFile = %s, want %s", showStat(got), showStat(tc.want))
			}
		})
	}
}

func sameStat(a, b *sandbox.FileStat) bool {
	if a == nil || b == nil {
		return a == b
	}
	if (a.Size == nil) != (b.Size == nil) || (a.Size != nil && *a.Size != *b.Size) {
		return false
	}
	return a.Path == b.Path && a.Kind == b.Kind
}

func showStat(s *sandbox.FileStat) string {
	switch {
	case s == nil:
		return "<nil>"
	case s.Size == nil:
		return fmt.Sprintf("{%q %s size=nil}", s.Path, s.Kind)
	}
	return fmt.Sprintf("{%q %s size=%d}", s.Path, s.Kind, *s.Size)
}

func TestReadFile(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		p        string
		maxBytes int64
		want     []byte
		wantErr  error
	}{
		{"a legitimate read", "real/inside.txt", oneMiB, inside, nil},
		{"exactly at the cap", "real/inside.txt", int64(len(inside)), inside, nil},
		{"above the cap is refused, not truncated", "real/inside.txt", int64(len(inside)) - 1, nil, &sandbox.TransferCapExceededError{}},
		{"a link is never read", "link-file", oneMiB, nil, &sandbox.NotRegularError{}},
		{"other is never read", "fifo", oneMiB, nil, &sandbox.NotRegularError{}},
		{"a directory", "real", oneMiB, nil, sandbox.ErrIsDirectory},
		{"missing", "missing.txt", oneMiB, nil, fs.ErrNotExist},
		{"read through a linked parent", "link-dir/secret.txt", oneMiB, nil, nc},
		{"a negative cap", "real/inside.txt", -1, nil, &sandbox.InvalidArgumentError{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fixture(t).ReadFile(ctx, tc.p, ".", tc.maxBytes)
			checkErr(t, err, tc.wantErr)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("ReadFile = %q, want %q", got, tc.want)
			}
			if tc.wantErr == sandbox.ErrIsDirectory || tc.wantErr == fs.ErrNotExist {
				checkErr(t, err, sandbox.ErrOS)
			}
		})
	}
	t.Run("a provider failure is not absence", func(t *testing.T) {
		sb := fixture(t)
		sb.FailStat(work+"/real/inside.txt", errBoom)
		_, err := sb.ReadFile(ctx, "real/inside.txt", ".", oneMiB)
		checkErr(t, err, errBoom)
	})
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		p         string
		recursive bool
		wantErr   error
		gone      []string
		survives  []string
	}{
		{"a removal removes", "plain.txt", false, nil, []string{work + "/plain.txt"}, []string{work + "/real/inside.txt"}},
		{"a missing path is success", "missing.txt", false, nil, nil, []string{work + "/plain.txt"}},
		{"a link is removed, never followed", "link-file", false, nil, []string{work + "/link-file"}, []string{outside + "/secret.txt"}},
		{"a link is removed, never followed, recursive", "link-dir", true, nil, []string{work + "/link-dir"}, []string{outside + "/secret.txt", outside + "/sub/leaf.txt"}},
		{"a path through a linked parent is refused", "link-dir/secret.txt", false, nc, nil, []string{work + "/link-dir", outside + "/secret.txt"}},
		{"a path through a linked parent is refused, recursive", "link-dir/sub", true, nc, nil, []string{outside + "/sub/leaf.txt"}},
		{"a directory needs recursive", "real", false, sandbox.ErrIsDirectory, nil, []string{work + "/real/inside.txt"}},
		{"recursive removes the tree", "real", true, nil, []string{work + "/real", work + "/real/inside.txt"}, []string{work + "/plain.txt"}},
		{"the working directory is refused", ".", false, nc, nil, []string{work + "/plain.txt"}},
		{"the working directory is refused, recursive", ".", true, nc, nil, []string{work + "/plain.txt"}},
		{"a path outside is refused", "../maf-sandbox-outside/secret.txt", false, nc, nil, []string{outside + "/secret.txt"}},
		{"other is removed", "fifo", false, nil, []string{work + "/fifo"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t)
			err := sb.Remove(ctx, tc.p, ".", tc.recursive)
			checkErr(t, err, tc.wantErr)
			for _, p := range tc.gone {
				if k, ok := sb.Kind(p); ok {
					t.Fatalf("%s is still there (%s)", p, k)
				}
			}
			for _, p := range tc.survives {
				if _, ok := sb.Kind(p); !ok {
					t.Fatalf("%s was removed", p)
				}
			}
		})
	}
}

func TestRemoveTwiceAndEmptyDirectory(t *testing.T) {
	ctx := context.Background()
	sb := fixture(t)
	for range 2 {
		if err := sb.Remove(ctx, "plain.txt", ".", false); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	sb.AddDir(work + "/empty")
	checkErr(t, sb.Remove(ctx, "empty", ".", false), sandbox.ErrIsDirectory)
	if err := sb.Remove(ctx, "empty", ".", true); err != nil {
		t.Fatalf("recursive Remove of an empty directory: %v", err)
	}
	// A link inside a recursive removal is unlinked, not followed.
	sb.AddSymlink(work+"/tree/escape", outside)
	sb.AddFile(work+"/tree/a.txt", nil)
	if err := sb.Remove(ctx, "tree", ".", true); err != nil {
		t.Fatalf("Remove tree: %v", err)
	}
	if _, ok := sb.Kind(work + "/tree/escape"); ok {
		t.Fatal("the link inside the tree survived")
	}
	if got, ok := sb.File(outside + "/secret.txt"); !ok || !bytes.Equal(got, secret) {
		t.Fatal("the link's target did not survive")
	}
}

func TestListDir(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		p, wd   string
		want    []string // "path kind"
		wantErr error
	}{
		{"the working directory names its links", ".", ".", []string{"empty directory", "fifo other", "link-dir symlink", "link-file symlink", "plain.txt file", "real directory"}, nil},
		{"children are relative to the working directory", "real", ".", []string{"real/inside.txt file"}, nil},
		{"an absolute working directory", ".", work + "/real", []string{"inside.txt file"}, nil},
		{"an empty directory lists nothing", "empty", ".", []string{}, nil},
		{"listing a linked directory", "link-dir", ".", nil, nc},
		{"listing through a linked parent", "link-dir/sub", ".", nil, nc},
		{"listing under a linked ancestor", ".", "link-dir/sub", nil, nc},
		{"a plain file is not a directory", "plain.txt", ".", nil, nd},
		{"missing", "missing", ".", nil, fs.ErrNotExist},
		{"outside", "..", ".", nil, nc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t)
			sb.AddDir(work + "/empty")
			entries, err := sb.ListDir(ctx, tc.p, tc.wd)
			checkErr(t, err, tc.wantErr)
			if tc.wantErr != nil {
				return
			}
			got := []string{}
			for _, e := range entries {
				got = append(got, e.Path+" "+string(e.Kind))
				if (e.Kind == sandbox.EntryFile) != (e.Size != nil) {
					t.Fatalf("%s: size %v for a %s", e.Path, e.Size, e.Kind)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ListDir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReclaim(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		dir, wd  string
		wantErr  error
		gone     []string
		survives []string
	}{
		{"a created directory is gone", "call-1", ".", nil, []string{work + "/call-1", work + "/call-1/a/b.txt"}, []string{work + "/plain.txt"}},
		{"an absolute child", work + "/call-1", ".", nil, []string{work + "/call-1"}, nil},
		{"a link inside is unlinked, not followed", "call-1", ".", nil, []string{work + "/call-1/escape"}, []string{outside + "/secret.txt"}},
		{"a missing directory is success", "call-2", ".", nil, nil, []string{work + "/call-1"}},
		{"an absent working directory still succeeds", "x", "absent", nil, nil, nil},
		{"a link as the target is removed itself", "link-dir", ".", nil, []string{work + "/link-dir"}, []string{outside + "/sub/leaf.txt"}},
		{"the working directory is refused", ".", ".", &sandbox.InvalidArgumentError{}, nil, []string{work + "/call-1"}},
		{"outside is refused", "../maf-sandbox-outside", ".", nc, nil, []string{outside + "/secret.txt"}},
		{"too close to the root", "tmp", "/", &sandbox.InvalidArgumentError{}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := fixture(t)
			sb.AddFile(work+"/call-1/a/b.txt", []byte("x"))
			sb.AddSymlink(work+"/call-1/escape", outside)
			err := sb.Reclaim(ctx, tc.dir, tc.wd, time.Second)
			checkErr(t, err, tc.wantErr)
			for _, p := range tc.gone {
				if _, ok := sb.Kind(p); ok {
					t.Fatalf("%s is still there", p)
				}
			}
			for _, p := range tc.survives {
				if _, ok := sb.Kind(p); !ok {
					t.Fatalf("%s was removed", p)
				}
			}
			calls := sb.ReclaimCalls()
			if len(calls) != 1 || calls[0].Text != tc.dir || calls[0].Timeout != time.Second {
				t.Fatalf("recorded %+v", calls)
			}
		})
	}
}

func TestReclaimError(t *testing.T) {
	sb := fixture(t, sandboxtest.WithReclaimError(errBoom))
	sb.AddFile(work+"/call-1/a.txt", nil)
	checkErr(t, sb.Reclaim(context.Background(), "call-1", ".", time.Second), errBoom)
	if _, ok := sb.Kind(work + "/call-1/a.txt"); !ok {
		t.Fatal("a failed reclaim removed something")
	}
	checkErr(t, sb.Reclaim(context.Background(), ".", ".", time.Second), &sandbox.InvalidArgumentError{})
}

func TestReset(t *testing.T) {
	ctx := context.Background()
	t.Run("unsupported by default", func(t *testing.T) {
		sb := fixture(t)
		err := sb.Reset(ctx, time.Second)
		checkErr(t, err, &sandbox.UnsupportedError{})
		if !strings.Contains(err.Error(), sandboxtest.DefaultName) {
			t.Fatalf("%v does not name the backend", err)
		}
	})
	t.Run("restores the baseline and changes the instance", func(t *testing.T) {
		sb := fixture(t, sandboxtest.WithReset())
		sb.SetBaseline()
		before := sb.InstanceID()
		if err := sb.WriteFile(ctx, "input.txt", []byte("x"), "."); err != nil {
			t.Fatal(err)
		}
		if err := sb.Remove(ctx, "plain.txt", ".", false); err != nil {
			t.Fatal(err)
		}
		if err := sb.Reset(ctx, time.Second); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if _, ok := sb.File(work + "/input.txt"); ok {
			t.Fatal("an input survived the reset")
		}
		if got, _ := sb.File(work + "/plain.txt"); !bytes.Equal(got, plainTxt) {
			t.Fatal("the baseline was not restored")
		}
		if after := sb.InstanceID(); after == before || after == "" {
			t.Fatalf("instance ID %q -> %q", before, after)
		}
		if sb.Resets() != 1 {
			t.Fatalf("Resets = %d", sb.Resets())
		}
	})
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sb := fixture(t)
	calls := map[string]func() error{
		"WriteFile": func() error { return sb.WriteFile(ctx, "a", nil, ".") },
		"Exec":      func() error { _, err := sb.Exec(ctx, sandbox.Shell("true"), ".", time.Second); return err },
		"RunCode":   func() error { _, err := sb.RunCode(ctx, "1", time.Second); return err },
		"StatFile":  func() error { _, err := sb.StatFile(ctx, "a", "."); return err },
		"ReadFile":  func() error { _, err := sb.ReadFile(ctx, "a", ".", 1); return err },
		"Remove":    func() error { return sb.Remove(ctx, "a", ".", false) },
		"ListDir":   func() error { _, err := sb.ListDir(ctx, ".", "."); return err },
		"Reclaim":   func() error { return sb.Reclaim(ctx, "a", ".", time.Second) },
		"Reset":     func() error { return sb.Reset(ctx, time.Second) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			checkErr(t, err, context.Canceled)
			if errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("cancellation reported as a timeout: %v", err)
			}
		})
	}
}

func TestNewSandboxOptions(t *testing.T) {
	cases := []struct {
		name    string
		opts    []sandboxtest.SandboxOption
		wantID  string
		wantErr bool
	}{
		{"defaults", nil, "", false},
		{"nil options are skipped", []sandboxtest.SandboxOption{nil}, "", false},
		{"an instance ID", []sandboxtest.SandboxOption{sandboxtest.WithInstanceID("c0ffee")}, "c0ffee", false},
		{"an empty instance ID", []sandboxtest.SandboxOption{sandboxtest.WithInstanceID("")}, "", true},
		{"a relative base", []sandboxtest.SandboxOption{sandboxtest.WithStorageBase("work")}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := sandboxtest.NewSandbox(tc.opts...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewSandbox error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if id := sb.InstanceID(); id == "" || (tc.wantID != "" && id != tc.wantID) {
				t.Fatalf("InstanceID = %q, want %q (or any non-empty)", id, tc.wantID)
			}
		})
	}
	a, _ := sandboxtest.NewSandbox()
	b, _ := sandboxtest.NewSandbox()
	if a.InstanceID() == b.InstanceID() {
		t.Fatalf("two sandboxes share instance ID %q", a.InstanceID())
	}
	c, err := sandboxtest.NewSandbox(sandboxtest.WithStorageBase("/srv//data/"))
	if err != nil {
		t.Fatal(err)
	}
	if c.StorageBase() != "/srv/data" {
		t.Fatalf("StorageBase = %q", c.StorageBase())
	}
	if k, ok := c.Kind("/srv/data"); !ok || k != sandbox.EntryDirectory {
		t.Fatal("the storage base was not created")
	}
}

func TestSeeding(t *testing.T) {
	sb := fixture(t)
	if target, ok := sb.LinkTarget(work + "/link-dir"); !ok || target != outside {
		t.Fatalf("LinkTarget = %q, %v", target, ok)
	}
	if _, ok := sb.LinkTarget(work + "/plain.txt"); ok {
		t.Fatal("a file has a link target")
	}
	sb.AddFile(work+"/plain.txt", []byte("replaced"))
	if got, _ := sb.File(work + "/plain.txt"); string(got) != "replaced" {
		t.Fatalf("seeding did not replace: %q", got)
	}
	sb.AddDir(work + "/real") // an existing directory is left alone
	if _, ok := sb.File(work + "/real/inside.txt"); !ok {
		t.Fatal("AddDir emptied a directory")
	}
	sb.FailStat(work+"/plain.txt", errBoom)
	sb.FailStat(work+"/plain.txt", nil)
	if _, err := sb.StatFile(context.Background(), "plain.txt", "."); err != nil {
		t.Fatalf("a cleared stat failure still fails: %v", err)
	}
	panics := map[string]func(){
		"a relative path":          func() { sb.AddFile("rel.txt", nil) },
		"a file as a parent":       func() { sb.AddFile(work+"/plain.txt/x", nil) },
		"a link as a parent":       func() { sb.AddOther(work + "/link-dir/x") },
		"a directory replaced":     func() { sb.AddSymlink(work+"/real", "/") },
		"a directory under a file": func() { sb.AddDir(work + "/plain.txt/d") },
	}
	for name, f := range panics {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

// TestConcurrentUse runs every method at once; -race checks the locking.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	sb := fixture(t, sandboxtest.WithStdout("echo", "hi"), sandboxtest.WithReset())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := "f" + string(rune('a'+i))
			_ = sb.WriteFile(ctx, name, []byte(name), ".")
			_, _ = sb.ReadFile(ctx, name, ".", oneMiB)
			_, _ = sb.StatFile(ctx, name, ".")
			_, _ = sb.ListDir(ctx, ".", ".")
			_, _ = sb.Exec(ctx, sandbox.Argv("echo", name), ".", time.Second)
			_, _ = sb.RunCode(ctx, name, time.Second)
			_ = sb.Remove(ctx, name, ".", false)
			_ = sb.Reclaim(ctx, name, ".", time.Second)
			_ = sb.Reset(ctx, time.Second)
			_ = sb.InstanceID()
			_ = sb.ExecCalls()
		})
	}
	wg.Wait()
	if n := len(sb.ExecCalls()); n != 8 {
		t.Fatalf("%d exec calls recorded, want 8", n)
	}
}
