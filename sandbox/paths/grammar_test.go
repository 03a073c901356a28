package paths_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// Paths no Linux call could take are refused as invalid arguments that name the rule, by the
// grammar check and by every policy, without a stat.
func TestGrammar(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := []struct {
		name    string
		p       string
		wantErr string // "" when accepted
	}{
		{"plain", "/w/a/b", ""},
		{"a 255-byte component", "/w/" + strings.Repeat("a", 255), ""},
		{"4095 bytes", ofLength(4095), ""},
		{"NUL", "/w/a\x00b", "NUL byte"},
		{"a 256-byte component", "/w/" + long, "NAME_MAX"},
		{"a 4096-byte component", "/w/" + strings.Repeat("c", 4096), "PATH_MAX"},
		{"4096 bytes", ofLength(4096), "PATH_MAX"},
		{"5 KiB", "/" + strings.Repeat("e/", 2560), "PATH_MAX"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := paths.CheckGrammar(tc.p)
			checkInvalid(t, err, tc.wantErr)
		})
	}
}

func TestPoliciesRefuseGrammarBeforeStat(t *testing.T) {
	noStat := func(context.Context, string) (*sandbox.FileStat, error) {
		t.Fatal("the walk ran on a path the grammar refuses")
		return nil, nil
	}
	policies := []struct {
		name    string
		resolve func(p, wd string) (string, error)
	}{
		{"confine", paths.ConfineResolve},
		{"write", func(p, wd string) (string, error) { return paths.ResolveWrite(context.Background(), noStat, p, wd) }},
		{"read", func(p, wd string) (string, error) { return paths.ResolveRead(context.Background(), noStat, p, wd) }},
		{"list", func(p, wd string) (string, error) { return paths.ResolveList(context.Background(), noStat, p, wd) }},
		{"remove", func(p, wd string) (string, error) { return paths.ResolveRemove(context.Background(), noStat, p, wd) }},
		{"reclaim", paths.ResolveReclaim},
	}
	cases := []struct {
		name, p, wd, wantErr string
	}{
		{"NUL in the path", "a\x00b", "/w", "NUL byte"},
		{"NUL hidden by dotdot", "x\x00/../a", "/w", "NUL byte"},
		{"NUL in the working directory", "a", "/w\x00", "NUL byte"},
		{"a 4096-character component", strings.Repeat("x", 4096), "/w", "PATH_MAX"},
		{"a 300-byte component", "sub/" + strings.Repeat("x", 300), "/w", "NAME_MAX"},
		{"a 5 KiB path", strings.Repeat("d/", 2560) + "f", "/w", "PATH_MAX"},
	}
	for _, pol := range policies {
		for _, tc := range cases {
			t.Run(pol.name+"/"+tc.name, func(t *testing.T) {
				_, err := pol.resolve(tc.p, tc.wd)
				checkInvalid(t, err, tc.wantErr)
			})
		}
	}
}

// A write names a regular file: a path spelled as a directory is refused before any stat,
// where normalising would have dropped the slash and written a file.
func TestCheckWriteRefusesDirectorySpelling(t *testing.T) {
	cases := []struct {
		name, p, wantErr string
	}{
		{"plain", "sub/f", ""},
		{"trailing slash", "sub/f/", `ends in "/"`},
		{"trailing slashes", "f//", `ends in "/"`},
		{"trailing dot", "sub/.", `ends in "."`},
		{"trailing dotdot", "sub/x/..", `ends in ".."`},
		{"absolute with a trailing slash", "/w/f/", `ends in "/"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := paths.CheckWrite(tc.p, "/w")
			checkInvalid(t, err, tc.wantErr)
			if tc.wantErr != "" {
				_, err = paths.ResolveWrite(context.Background(), func(context.Context, string) (*sandbox.FileStat, error) {
					t.Fatal("the walk ran on a path spelled as a directory")
					return nil, nil
				}, tc.p, "/w")
				checkInvalid(t, err, tc.wantErr)
			}
		})
	}
}

// ofLength is an absolute path of n bytes made of 200-byte components.
func ofLength(n int) string {
	p := strings.Repeat("/"+strings.Repeat("b", 199), n/200+1)
	return p[:n-1] + "c"
}

func checkInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var inv *sandbox.InvalidArgumentError
	if !errors.As(err, &inv) || !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("err = %T %v, want *sandbox.InvalidArgumentError", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to name %q", err, want)
	}
	if len(err.Error()) > 300 {
		t.Fatalf("the message is %d bytes long; it should shorten the path", len(err.Error()))
	}
}
