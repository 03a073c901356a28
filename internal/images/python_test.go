package images

import "testing"

// TestPythonRecipeHash: the inputs hash changes with every input, so a changed recipe is
// rebuilt and an unchanged one is not.
func TestPythonRecipeHash(t *testing.T) {
	base := pythonRecipe{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3"}, Mirror: "http://m/debian", Version: 1}
	seen := map[string]bool{base.hash(): true}
	for _, r := range []pythonRecipe{
		{Suite: "trixie", Variant: "minbase", Packages: []string{"python3"}, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "buildd", Packages: []string{"python3"}, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3", "curl"}, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3"}, Mirror: "http://n/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3"}, Mirror: "http://m/debian", Version: 2},
	} {
		if seen[r.hash()] {
			t.Fatalf("recipe %+v hashes like another", r)
		}
		seen[r.hash()] = true
	}
	if base.hash() != (pythonRecipe{Suite: "bookworm", Variant: "minbase", Packages: []string{"python3"}, Mirror: "http://m/debian", Version: 1}).hash() {
		t.Fatal("the hash is not stable")
	}
}

func TestDebianMirrorFromEnv(t *testing.T) {
	t.Setenv(EnvDebianMirror, "http://mirror.example/debian")
	if m, err := debianMirror(); err != nil || m != "http://mirror.example/debian" {
		t.Fatalf("debianMirror = %q, %v", m, err)
	}
}
