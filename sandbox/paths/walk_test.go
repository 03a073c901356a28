package paths_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func TestAncestors(t *testing.T) {
	cases := []struct {
		name, target, wd string
		want             []string
	}{
		{"above and below the working directory", work + "/out", work,
			[]string{"/maf-sandbox", work, work + "/out"}},
		{"the working directory itself", work, work, []string{"/maf-sandbox", work}},
		{"deep target", "/w/a/b/c", "/w/", []string{"/w", "/w/a", "/w/a/b", "/w/a/b/c"}},
		{"root working directory", "/a/b", "/", []string{"/a", "/a/b"}},
		{"root itself", "/", "/", nil},
		{"unnormalised inputs", "/w//a/./b", "/w/.", []string{"/w", "/w/a", "/w/a/b"}},
		{"the parent of the working directory", "/maf-sandbox", work, []string{"/maf-sandbox"}},
		{"outside lists the target's own prefixes", "/etc/x", "/w", []string{"/etc", "/etc/x"}},
		{"relative outside", "a/b", "/w", []string{"a", "a/b"}},
		{"relative single segment", "a", "/w", []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.Ancestors(tc.target, tc.wd); !slices.Equal(got, tc.want) {
				t.Fatalf("Ancestors(%q, %q) = %q, want %q", tc.target, tc.wd, got, tc.want)
			}
			// A target at or below wd is walked along exactly its prefixes: the list the actors
			// prefetch stats for.
			if _, inside := paths.RelativeTo(tc.target, tc.wd); inside {
				if got := paths.Prefixes(tc.target); !slices.Equal(got, tc.want) {
					t.Fatalf("Prefixes(%q) = %q, want Ancestors' %q", tc.target, got, tc.want)
				}
			}
		})
	}
}

func TestRefuseSymlinkedAncestors(t *testing.T) {
	cases := []struct {
		name        string
		fs          func() *memFS
		target, wd  string
		includeSelf bool
		wantErr     error
		wantVisited []string // nil: not checked
	}{
		{"a legitimate path", layout, work + "/real/inside.txt", work, false, nil,
			[]string{"/maf-sandbox", work, work + "/real"}},
		{"a linked parent", layout, work + "/link-dir/secret.txt", work, false, &sandbox.NotConfinedError{}, nil},
		{"a link at the leaf is not walked", layout, work + "/link-dir", work, false, nil,
			[]string{"/maf-sandbox", work}},
		{"a link at the leaf is walked with includeSelf", layout, work + "/link-dir", work, true,
			&sandbox.NotConfinedError{}, nil},
		{"a plain-file parent is not a directory, not an escape", layout, work + "/plain.txt/deeper.txt", work, false,
			&sandbox.NotDirectoryError{Path: work + "/plain.txt"}, nil},
		{"an other parent is not a directory", layout, work + "/fifo/x", work, false,
			&sandbox.NotDirectoryError{Path: work + "/fifo"}, nil},
		{"the walk stops at the first missing component", layout, work + "/missing/deeper/x", work, false, nil,
			[]string{"/maf-sandbox", work, work + "/missing"}},
		{"a linked working directory", layout, work + "/link-dir/secret.txt", work + "/link-dir", false,
			&sandbox.NotConfinedError{}, nil},
		{"a linked ancestor of the working directory", layout, work + "/link-dir/sub/leaf.txt", work + "/link-dir/sub", false,
			&sandbox.NotConfinedError{}, nil},
		{"listing a linked working directory", layout, work + "/link-dir", work + "/link-dir", true,
			&sandbox.NotConfinedError{}, nil},
		{"/maf-sandbox -> / is refused above the working directory", func() *memFS {
			// A following stat would show /maf-sandbox/work as a real directory (it is /work)
			// and serve /; the walk starts above the working directory and sees the link.
			return newMemFS(map[string]sandbox.EntryKind{
				"/maf-sandbox": sandbox.EntrySymlink,
				"/work":        sandbox.EntryDirectory,
			})
		}, work + "/secret.txt", work, false, &sandbox.NotConfinedError{}, []string{"/maf-sandbox"}},
		{"a target directly under root walks nothing", layout, "/x", "/", false, nil, []string{}},
		{"a stat failure propagates", func() *memFS {
			m := layout()
			m.fail[work] = errBoom
			return m
		}, work + "/a", work, false, errBoom, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.fs()
			err := paths.RefuseSymlinkedAncestors(context.Background(), fs.stat, tc.target, tc.wd, tc.includeSelf)
			checkErr(t, err, tc.wantErr)
			var nc *sandbox.NotConfinedError
			// "not a real directory" is what the reference's hosts match on.
			if errors.As(err, &nc) && (!strings.Contains(nc.Reason, "is a link") || !strings.Contains(nc.Reason, "not a real directory")) {
				t.Fatalf("reason %q does not say the component is a link, not a real directory", nc.Reason)
			}
			if tc.wantVisited != nil && !slices.Equal(fs.visited, tc.wantVisited) {
				t.Fatalf("visited %q, want %q", fs.visited, tc.wantVisited)
			}
		})
	}
}

func TestRefuseSymlinkedAncestorsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fs := layout()
	err := paths.RefuseSymlinkedAncestors(ctx, fs.stat, work+"/real/inside.txt", work, false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if len(fs.visited) != 0 {
		t.Fatalf("a cancelled walk still statted %q", fs.visited)
	}
}

func TestRefuseSymlinkedAncestorsWrapsStatErrors(t *testing.T) {
	fs := layout()
	fs.fail["/maf-sandbox"] = fmt.Errorf("docker cp: %w", errBoom)
	err := paths.RefuseSymlinkedAncestors(context.Background(), fs.stat, work+"/a", work, false)
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "/maf-sandbox") {
		t.Fatalf("error = %v, want errBoom wrapped with the component", err)
	}
}
