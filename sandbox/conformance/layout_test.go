package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestConformanceNewLayout(t *testing.T) {
	cases := []struct {
		name    string
		wd      string
		want    Layout
		wantErr error
	}{
		{"default base", "/maf-sandbox/work", Layout{"/maf-sandbox/work", "/maf-sandbox/work-outside"}, nil},
		{"trailing slash", "/maf-sandbox/work/", Layout{"/maf-sandbox/work", "/maf-sandbox/work-outside"}, nil},
		{"dot segments", "/a/./b/../work", Layout{"/a/work", "/a/work-outside"}, nil},
		{"top level", "/work", Layout{"/work", "/work-outside"}, nil},
		{"root has no sibling", "/", Layout{}, sandbox.ErrInvalid},
		{"relative", "work", Layout{}, sandbox.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewLayout(tc.wd)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("NewLayout(%q) = %+v, %v; want %+v, %v", tc.wd, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestConformanceTheOutsideIsASiblingSharingThePrefix(t *testing.T) {
	l, err := NewLayout("/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.Outside, l.Work) || strings.HasPrefix(l.Outside, l.Work+"/") {
		t.Fatalf("outside %s must share %s's string prefix and still lie outside it", l.Outside, l.Work)
	}
	if _, inside := paths.RelativeTo(l.Outside, l.Work); inside {
		t.Fatalf("outside %s is inside %s", l.Outside, l.Work)
	}
	for rel, want := range map[string]string{
		"secret.txt":   "/maf-sandbox/work-outside/secret.txt",
		"sub/leaf.txt": "/maf-sandbox/work-outside/sub/leaf.txt",
	} {
		beyond := l.Beyond(rel)
		if got := paths.Join(l.Work, beyond); got != want || !strings.HasPrefix(beyond, "../") {
			t.Errorf("Beyond(%q) = %q, resolving to %q; want a relative path to %q", rel, beyond, got, want)
		}
	}
	if l.LinkedDir() != "/maf-sandbox/work/link-dir" || l.UnderLinkedDir() != "/maf-sandbox/work/link-dir/sub" {
		t.Fatalf("linked directories = %s, %s", l.LinkedDir(), l.UnderLinkedDir())
	}
}
