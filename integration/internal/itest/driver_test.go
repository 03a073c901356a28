package itest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDriverLevelNamesIntegrationTests keeps the list honest: a name that is not a test of
// the integration suite (renamed, moved, misspelt) would silently drop a test from the CLI
// pass. It reads every _test.go file under integration/, this package's two levels up.
func TestDriverLevelNamesIntegrationTests(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	isTest := regexp.MustCompile(`^Test[A-Z]`)
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && isTest.MatchString(fn.Name.Name) {
				tests = append(tests, fn.Name.Name)
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range DriverLevel() {
		if !slices.Contains(tests, name) {
			t.Errorf("DriverLevel names %s, which is not a test of the integration suite", name)
		}
		if seen[name] {
			t.Errorf("DriverLevel names %s twice", name)
		}
		seen[name] = true
	}
}
