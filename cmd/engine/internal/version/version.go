// Package version is the engine binary's version, from the module information the go command
// stamped into it: "engine version" prints it, serve logs it, and health and the micro service
// report it (serve's and the demo's), so they always agree.
package version

import (
	"regexp"
	"runtime/debug"
	"strings"
)

// Dev is the version of a build that carries no module or VCS information.
const Dev = "0.0.0-dev"

// Build is this binary's version: [From] its build information, or [Dev] without any.
func Build() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Dev
	}
	return From(info)
}

// From is the main module's version without its "v" (a release, or since Go 1.24 a
// pseudo-version with "+dirty" for a modified tree). A "(devel)" build falls back on the VCS
// revision: 0.0.0-dev+<revision>, with ".modified" when the tree had changes. It is always a
// semantic version, the only kind the micro service accepts; with nothing to go on it is
// [Dev].
func From(info *debug.BuildInfo) string {
	if v := strings.TrimPrefix(info.Main.Version, "v"); v != "" && v != "(devel)" && semverRE.MatchString(v) {
		return v
	}
	var rev string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" || !buildIDRE.MatchString(rev) {
		return Dev
	}
	v := Dev + "+" + rev
	if modified {
		v += ".modified"
	}
	return v
}

var (
	semverRE  = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	buildIDRE = regexp.MustCompile(`^[0-9A-Za-z-]+$`)
)
