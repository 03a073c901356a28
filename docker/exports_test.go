package docker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const importPath = "github.com/mafsandbox/engine/docker"

// unspelled are the exported names no other package of the module writes out, each kept for
// the reason given (doc.go, "What this package exports").
var unspelled = map[string]string{
	"Option":         "the type of NewEngine's options: an embedder that builds a list of them names it",
	"NameRole":       "the type ParseName returns and the Role constants have",
	"ErrCapExceeded": "the class *CapExceededError reports, for errors.Is",
	"Containers":     "the container part of Driver, embedded in it: its methods are the seam's",
	"DefaultConfig":  "an embedder's starting configuration, every default filled in",
	"ErrNotRunning":  "a class Containers.Pause names: a caller that pauses a stopped container meets it",
	"SSHError":       "the type of an ssh:// endpoint's failure, for errors.As: its exit status and ssh's words",
}

// TestExportsHaveUsers holds the package to its rule: a top-level name is exported only when
// another package of the module uses it or it is listed in unspelled. A new export with no user
// fails here; so does an entry of unspelled that has gained a user or lost its name.
func TestExportsHaveUsers(t *testing.T) {
	exported := exportedNames(t)
	used := usedOutside(t)
	var missing []string
	for name := range exported {
		if !used[name] && unspelled[name] == "" {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		t.Errorf("docker.%s is exported but no other package uses it: unexport it, or list it in unspelled with the reason", name)
	}
	for name := range unspelled {
		switch {
		case !exported[name]:
			t.Errorf("unspelled lists docker.%s, which the package no longer exports", name)
		case used[name]:
			t.Errorf("unspelled lists docker.%s, which another package now uses: drop it from the list", name)
		}
	}
	if len(exported) < 50 || len(used) < 50 {
		t.Fatalf("read %d exported and %d used names: the walk is broken", len(exported), len(used))
	}
	t.Logf("%d exported top-level names", len(exported))
}

// exportedNames are the package's exported top-level functions, types, constants and variables.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

// usedOutside are the names every other package of the module (tests included, this
// directory's own files not) selects from this one.
func usedOutside(t *testing.T) map[string]bool {
	t.Helper()
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if abs, _ := filepath.Abs(filepath.Dir(path)); abs == self || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
				local = "docker"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		if local == "." || local == "_" {
			t.Errorf("%s imports docker as %q: its uses cannot be counted", path, local)
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && id.Obj == nil {
					used[sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}
