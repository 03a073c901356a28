package version

import (
	"runtime/debug"
	"testing"
)

func TestVersionFrom(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	cases := []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{name: "release", version: "v1.4.2", want: "1.4.2"},
		{name: "release candidate", version: "v2.0.0-rc.1", want: "2.0.0-rc.1"},
		{name: "pseudo-version", version: "v0.0.0-20261201094712-4237ce8abcde", want: "0.0.0-20261201094712-4237ce8abcde"},
		{name: "pseudo-version of a modified tree", version: "v0.0.0-20261201094712-4237ce8abcde+dirty", want: "0.0.0-20261201094712-4237ce8abcde+dirty"},
		{name: "devel with a revision", version: "(devel)", settings: vcs("4237ce8abcdef0123456789", "false"), want: "0.0.0-dev+4237ce8abcdef0123456789"},
		{name: "devel with a modified tree", version: "(devel)", settings: vcs("4237ce8abcdef", "true"), want: "0.0.0-dev+4237ce8abcdef.modified"},
		{name: "devel without VCS", version: "(devel)", want: Dev},
		{name: "no version at all", want: Dev},
		{name: "a revision semver cannot carry", version: "(devel)", settings: vcs("not/a+rev", "false"), want: Dev},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/mafsandbox/engine", Version: tc.version}, Settings: tc.settings}
			got := From(info)
			if got != tc.want {
				t.Fatalf("From(%q, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
			}
			if !semverRE.MatchString(got) {
				t.Fatalf("From gave %q, which the micro service would refuse", got)
			}
		})
	}
}
