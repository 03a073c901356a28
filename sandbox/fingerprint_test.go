package sandbox_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestCompareFingerprints(t *testing.T) {
	a := sandbox.NewFingerprint([]string{"/b", "/a", "/a"}, []string{"2:2 x", "1:1 y"})
	if got := a.ChangedPaths(); strings.Join(got, ",") != "/a,/b" {
		t.Fatalf("paths %v, want the sorted set", got)
	}
	b := sandbox.NewFingerprint([]string{"/a", "/c"}, []string{"1:1 y", "3:3 z"})
	c := sandbox.CompareFingerprints(a, b)
	want := sandbox.FingerprintComparison{PathsAdded: []string{"/c"}, PathsRemoved: []string{"/b"},
		ProgramsAdded: []string{"3:3 z"}, ProgramsRemoved: []string{"2:2 x"}}
	if fmt.Sprint(c) != fmt.Sprint(want) || c.Clean() {
		t.Fatalf("comparison %+v, want %+v", c, want)
	}
	if !sandbox.CompareFingerprints(a, a).Clean() || !a.Equal(a) || a.Equal(b) {
		t.Fatalf("a fingerprint must equal itself and only itself")
	}
}
