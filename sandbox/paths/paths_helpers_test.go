package paths_test

import (
	"context"
	"errors"
	"sync"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// memFS is a no-follow stat over a map of absolute paths to kinds; "/" is always a directory.
// It records every path it was asked about.
type memFS struct {
	mu      sync.Mutex
	kinds   map[string]sandbox.EntryKind
	fail    map[string]error
	visited []string
}

func newMemFS(kinds map[string]sandbox.EntryKind) *memFS {
	return &memFS{kinds: kinds, fail: map[string]error{}}
}

func (m *memFS) stat(_ context.Context, abs string) (*sandbox.FileStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.visited = append(m.visited, abs)
	if err := m.fail[abs]; err != nil {
		return nil, err
	}
	if abs == "/" {
		return sandbox.NewFileStat("", sandbox.EntryDirectory, 0), nil
	}
	k, ok := m.kinds[abs]
	if !ok {
		return nil, nil
	}
	return sandbox.NewFileStat("", k, 3), nil
}

var _ paths.StatFunc = (*memFS)(nil).stat

// The conformance layout of protocol §14.1, under work = /maf-sandbox/work.
const (
	work    = "/maf-sandbox/work"
	outside = work + "-outside"
)

func layout() *memFS {
	const (
		dir   = sandbox.EntryDirectory
		file  = sandbox.EntryFile
		link  = sandbox.EntrySymlink
		other = sandbox.EntryOther
	)
	return newMemFS(map[string]sandbox.EntryKind{
		"/maf-sandbox":            dir,
		work:                      dir,
		work + "/real":            dir,
		work + "/real/inside.txt": file,
		work + "/plain.txt":       file,
		work + "/fifo":            other,
		work + "/link-dir":        link,
		work + "/link-file":       link,
		outside:                   dir,
		outside + "/secret.txt":   file,
		outside + "/sub":          dir,
		outside + "/sub/leaf.txt": file,
	})
}

var errBoom = errors.New("engine unreachable")

// checkErr fails unless err matches want: nil, a sentinel (errors.Is) or one of the typed
// errors below (errors.As).
func checkErr(t interface {
	Helper()
	Fatalf(string, ...any)
}, err, want error) {
	t.Helper()
	switch w := want.(type) {
	case nil:
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	case *sandbox.NotConfinedError:
		var target *sandbox.NotConfinedError
		if !errors.As(err, &target) || !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("error = %v (%T), want *sandbox.NotConfinedError", err, err)
		}
	case *sandbox.NotDirectoryError:
		var target *sandbox.NotDirectoryError
		if !errors.As(err, &target) || !errors.Is(err, sandbox.ErrOS) {
			t.Fatalf("error = %v (%T), want *sandbox.NotDirectoryError", err, err)
		}
		if w.Path != "" && w.Path != target.Path {
			t.Fatalf("NotDirectoryError.Path = %q, want %q", target.Path, w.Path)
		}
	case *sandbox.InvalidArgumentError:
		var target *sandbox.InvalidArgumentError
		if !errors.As(err, &target) || !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("error = %v (%T), want *sandbox.InvalidArgumentError", err, err)
		}
	default:
		if !errors.Is(err, want) {
			t.Fatalf("error = %v, want one matching %v", err, want)
		}
	}
}
