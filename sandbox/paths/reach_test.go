package paths_test

import (
	"testing"

	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestHostOwned(t *testing.T) {
	root := func(mode int64) paths.Owner { return paths.Owner{Path: "/x", UID: 0, Mode: mode} }
	cases := []struct {
		name                string
		entries             []paths.Owner
		emptyMeansHostOwned bool
		want                bool
	}{
		{"empty, caller says host owned", nil, true, true},
		{"empty, caller says not", nil, false, false},
		{"root owned, nobody else writes", []paths.Owner{root(0o755), root(0o700)}, false, true},
		{"setuid and sticky bits do not matter", []paths.Owner{root(0o4755), root(0o1755)}, false, true},
		{"a guest-owned component", []paths.Owner{root(0o755), {Path: "/w", UID: 1000, Mode: 0o755}}, true, false},
		{"group writable", []paths.Owner{root(0o775)}, false, false},
		{"other writable", []paths.Owner{root(0o757)}, false, false},
		{"world-writable sticky like /tmp", []paths.Owner{root(0o1777)}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.HostOwned(tc.entries, tc.emptyMeansHostOwned); got != tc.want {
				t.Fatalf("HostOwned = %v, want %v", got, tc.want)
			}
		})
	}
}
