package paths_test

import (
	"context"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

type policy func(ctx context.Context, stat paths.StatFunc, p, wd string) (string, error)

func TestPolicies(t *testing.T) {
	var (
		nc  = &sandbox.NotConfinedError{}
		nd  = &sandbox.NotDirectoryError{}
		ctx = context.Background()
	)
	cases := []struct {
		name    string
		policy  policy
		fs      func() *memFS
		p, wd   string
		want    string
		wantErr error
	}{
		// WriteFile (§4.2, §14.3).
		{"write lands", paths.ResolveWrite, layout, "new.txt", work, work + "/new.txt", nil},
		{"write replaces a file", paths.ResolveWrite, layout, "plain.txt", work, work + "/plain.txt", nil},
		{"write creates parents", paths.ResolveWrite, layout, "deep/er/est/leaf.txt", work, work + "/deep/er/est/leaf.txt", nil},
		{"write outside", paths.ResolveWrite, layout, "../work-outside/x", work, "", nc},
		{"write through a linked parent", paths.ResolveWrite, layout, "link-dir/secret.txt", work, "", nc},
		{"write to a linked destination", paths.ResolveWrite, layout, "link-file", work, "", nc},
		{"write the working directory", paths.ResolveWrite, layout, ".", work, "", nc},
		{"write the working directory, absolute", paths.ResolveWrite, layout, work + "/", work, "", nc},
		{"write with a backslash", paths.ResolveWrite, layout, `a\b.txt`, work, "", nc},
		{"write under a plain file", paths.ResolveWrite, layout, "plain.txt/x", work, "", nd},
		{"write in a linked working directory", paths.ResolveWrite, layout, "x", work + "/link-dir", "", nc},
		{"write under a linked ancestor of the working directory", paths.ResolveWrite, layout, "x", work + "/link-dir/sub", "", nc},
		{"write with a failing leaf stat", paths.ResolveWrite, func() *memFS {
			m := layout()
			m.fail[work+"/x"] = errBoom
			return m
		}, "x", work, "", errBoom},

		// StatFile and ReadFile (§4.5, §4.6, §14.2).
		{"read a file", paths.ResolveRead, layout, "real/inside.txt", work, work + "/real/inside.txt", nil},
		{"read leaves a linked leaf to the method", paths.ResolveRead, layout, "link-file", work, work + "/link-file", nil},
		{"read through a linked parent", paths.ResolveRead, layout, "link-dir/secret.txt", work, "", nc},
		{"read in a linked working directory", paths.ResolveRead, layout, "secret.txt", work + "/link-dir", "", nc},
		{"read under a linked ancestor of the working directory", paths.ResolveRead, layout, "leaf.txt", work + "/link-dir/sub", "", nc},
		{"read under a plain file", paths.ResolveRead, layout, "plain.txt/deeper.txt", work, "", nd},
		{"read the working directory", paths.ResolveRead, layout, ".", work, work, nil},
		{"read outside", paths.ResolveRead, layout, outside + "/secret.txt", work, "", nc},

		// ListDir (§4.8, §14.2).
		{"list the working directory", paths.ResolveList, layout, ".", work, work, nil},
		{"list a directory", paths.ResolveList, layout, "real", work, work + "/real", nil},
		{"list a linked directory", paths.ResolveList, layout, "link-dir", work, "", nc},
		{"list through a linked parent", paths.ResolveList, layout, "link-dir/sub", work, "", nc},
		{"list under a linked ancestor", paths.ResolveList, layout, ".", work + "/link-dir/sub", "", nc},
		{"list a plain file is not a directory", paths.ResolveList, layout, "plain.txt", work, "", nd},

		// Remove (§4.7, §14.5).
		{"remove a file", paths.ResolveRemove, layout, "plain.txt", work, work + "/plain.txt", nil},
		{"remove a link never resolves it", paths.ResolveRemove, layout, "link-file", work, work + "/link-file", nil},
		{"remove a linked directory never resolves it", paths.ResolveRemove, layout, "link-dir", work, work + "/link-dir", nil},
		{"remove a missing path", paths.ResolveRemove, layout, "missing/x", work, work + "/missing/x", nil},
		{"remove through a linked parent", paths.ResolveRemove, layout, "link-dir/secret.txt", work, "", nc},
		{"remove the working directory", paths.ResolveRemove, layout, ".", work, "", nc},
		{"remove the working directory, absolute", paths.ResolveRemove, layout, work, work, "", nc},
		{"remove outside", paths.ResolveRemove, layout, "../work-outside", work, "", nc},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.policy(ctx, tc.fs().stat, tc.p, tc.wd)
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolveReclaim(t *testing.T) {
	cases := []struct {
		name, dir, wd string
		want          string
		wantErr       error
	}{
		{"a relative child", "0123456789ab", work, work + "/0123456789ab", nil},
		{"an absolute child", work + "/0123456789ab", work, work + "/0123456789ab", nil},
		{"a deeper child", "calls/0123456789ab", work, work + "/calls/0123456789ab", nil},
		{"two components is enough", "x", "/w", "/w/x", nil},
		{"the working directory itself", ".", work, "", &sandbox.InvalidArgumentError{}},
		{"the working directory itself, absolute", work, work, "", &sandbox.InvalidArgumentError{}},
		{"outside", "../elsewhere", work, "", &sandbox.NotConfinedError{}},
		{"a sibling sharing a prefix", outside, work, "", &sandbox.NotConfinedError{}},
		{"a backslash", `a\b`, work, "", &sandbox.NotConfinedError{}},
		{"too close to the root", "tmp", "/", "", &sandbox.InvalidArgumentError{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := paths.ResolveReclaim(tc.dir, tc.wd)
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Fatalf("ResolveReclaim(%q, %q) = %q, want %q", tc.dir, tc.wd, got, tc.want)
			}
		})
	}
}
