package images

import "testing"

// TestSSHDRecipeHash: the inputs hash changes with every input, so a changed recipe is rebuilt
// and an unchanged one is not; it never equals the Python image's.
func TestSSHDRecipeHash(t *testing.T) {
	base := sshdRecipe{Suite: "bookworm", Variant: "minbase", Packages: []string{"openssh-server", "docker.io"}, Mirror: "http://m/debian", Version: 1}
	seen := map[string]bool{base.hash(): true}
	for _, r := range []sshdRecipe{
		{Suite: "trixie", Variant: "minbase", Packages: base.Packages, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "buildd", Packages: base.Packages, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: []string{"openssh-server"}, Mirror: "http://m/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: base.Packages, Mirror: "http://n/debian", Version: 1},
		{Suite: "bookworm", Variant: "minbase", Packages: base.Packages, Mirror: "http://m/debian", Version: 2},
	} {
		if seen[r.hash()] {
			t.Fatalf("recipe %+v hashes like another", r)
		}
		seen[r.hash()] = true
	}
	py := pythonRecipe(base)
	if py.hash() == base.hash() {
		t.Fatal("the sshd recipe hashes like the python recipe with the same fields")
	}
}
