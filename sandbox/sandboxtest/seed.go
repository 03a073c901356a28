package sandboxtest

import (
	"fmt"
	"path"
	"slices"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Seeding plays the image and the guest: it writes the store directly, past every policy,
// creating missing parents as directories. Each helper takes an absolute path and replaces
// a file, link or "other" entry already there. It panics, as a bug in the test, on a relative
// path, on a parent that is not a directory, and on replacing a directory.

// AddFile seeds a regular file.
func (s *Sandbox) AddFile(abs string, content []byte) {
	s.seed(abs, func(st store, p string) { st.files[p] = slices.Clone(content) })
}

// AddDir seeds a directory and its missing parents; an existing directory is left alone.
func (s *Sandbox) AddDir(abs string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fs.mkdirAll(seedPath(abs)); err != nil {
		panic(fmt.Sprintf("sandboxtest: cannot seed directory %s: %v", abs, err))
	}
}

// AddSymlink seeds a symbolic link to target. The fake never follows it; the target is kept
// so tests can check it survived.
func (s *Sandbox) AddSymlink(abs, target string) {
	s.seed(abs, func(st store, p string) { st.links[p] = target })
}

// AddOther seeds an entry that is neither file, directory nor link (a fifo, say).
func (s *Sandbox) AddOther(abs string) {
	s.seed(abs, func(st store, p string) { st.others[p] = struct{}{} })
}

// FailStat makes the fake's own stat of abs fail with err, as an unreachable engine would;
// a nil err clears it.
func (s *Sandbox) FailStat(abs string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.statErrs, seedPath(abs))
		return
	}
	s.statErrs[seedPath(abs)] = err
}

func (s *Sandbox) seed(abs string, put func(store, string)) {
	p := seedPath(abs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, _ := s.fs.kind(p); k == sandbox.EntryDirectory {
		panic(fmt.Sprintf("sandboxtest: cannot seed %s: a directory is there", abs))
	}
	if err := s.fs.mkdirAll(path.Dir(p)); err != nil {
		panic(fmt.Sprintf("sandboxtest: cannot seed %s: %v", abs, err))
	}
	s.fs.drop(p)
	put(s.fs, p)
}

func seedPath(abs string) string {
	if !path.IsAbs(abs) {
		panic(fmt.Sprintf("sandboxtest: seed path %q is not absolute", abs))
	}
	return paths.Normalize(abs)
}

// File returns a copy of the regular file at abs, if there is one.
func (s *Sandbox) File(abs string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.fs.files[paths.Normalize(abs)]
	return slices.Clone(b), ok
}

// Kind reports what is stored at abs, without following it.
func (s *Sandbox) Kind(abs string) (sandbox.EntryKind, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fs.kind(paths.Normalize(abs))
}

// LinkTarget returns the target of the link at abs, if there is one.
func (s *Sandbox) LinkTarget(abs string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.fs.links[paths.Normalize(abs)]
	return t, ok
}

// Paths lists every stored path, sorted ("/" is implicit and not listed).
func (s *Sandbox) Paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fs.all()
}
