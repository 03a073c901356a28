package sandboxtest

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// store is the fake's filesystem. Keys are normalised absolute guest paths; "/" is always a
// directory and is never stored. Nothing here follows a link.
type store struct {
	files  map[string][]byte
	dirs   map[string]struct{}
	links  map[string]string
	others map[string]struct{}
}

func newStore() store {
	return store{files: map[string][]byte{}, dirs: map[string]struct{}{},
		links: map[string]string{}, others: map[string]struct{}{}}
}

// clone copies the store deeply enough that neither copy sees the other's writes.
func (s store) clone() store {
	c := store{files: make(map[string][]byte, len(s.files)), dirs: maps.Clone(s.dirs),
		links: maps.Clone(s.links), others: maps.Clone(s.others)}
	for k, v := range s.files {
		c.files[k] = slices.Clone(v)
	}
	return c
}

// kind reports what is at abs, if anything.
func (s store) kind(abs string) (sandbox.EntryKind, bool) {
	if abs == "/" {
		return sandbox.EntryDirectory, true
	}
	if _, ok := s.dirs[abs]; ok {
		return sandbox.EntryDirectory, true
	}
	if _, ok := s.files[abs]; ok {
		return sandbox.EntryFile, true
	}
	if _, ok := s.links[abs]; ok {
		return sandbox.EntrySymlink, true
	}
	if _, ok := s.others[abs]; ok {
		return sandbox.EntryOther, true
	}
	return "", false
}

// stat describes abs without following it, with an empty Path; nil when absent.
func (s store) stat(abs string) *sandbox.FileStat {
	k, ok := s.kind(abs)
	if !ok {
		return nil
	}
	return sandbox.NewFileStat("", k, int64(len(s.files[abs])))
}

// mkdirAll makes abs and its missing ancestors directories. It fails, having created
// nothing, when an existing component is not a directory.
func (s store) mkdirAll(abs string) error {
	var missing []string
	for cur := abs; cur != "/"; cur = path.Dir(cur) {
		k, ok := s.kind(cur)
		if !ok {
			missing = append(missing, cur)
			continue
		}
		if k != sandbox.EntryDirectory {
			return fmt.Errorf("%s is a %s, not a directory", cur, k)
		}
		break
	}
	for _, d := range missing {
		s.dirs[d] = struct{}{}
	}
	return nil
}

// drop removes the entry at abs itself (a link, never its target).
func (s store) drop(abs string) {
	delete(s.files, abs)
	delete(s.dirs, abs)
	delete(s.links, abs)
	delete(s.others, abs)
}

// dropTree removes abs and everything below it; links inside are removed, never followed.
func (s store) dropTree(abs string) {
	s.drop(abs)
	prefix := strings.TrimSuffix(abs, "/") + "/"
	for _, m := range []map[string]struct{}{s.dirs, s.others} {
		maps.DeleteFunc(m, func(k string, _ struct{}) bool { return strings.HasPrefix(k, prefix) })
	}
	maps.DeleteFunc(s.files, func(k string, _ []byte) bool { return strings.HasPrefix(k, prefix) })
	maps.DeleteFunc(s.links, func(k, _ string) bool { return strings.HasPrefix(k, prefix) })
}

// children lists the immediate children of dir, sorted.
func (s store) children(dir string) []string {
	var out []string
	for _, k := range s.all() {
		if path.Dir(k) == dir {
			out = append(out, k)
		}
	}
	return out
}

// all lists every stored path, sorted.
func (s store) all() []string {
	out := slices.Concat(slices.Collect(maps.Keys(s.dirs)), slices.Collect(maps.Keys(s.files)),
		slices.Collect(maps.Keys(s.links)), slices.Collect(maps.Keys(s.others)))
	slices.Sort(out)
	return out
}
