package hostfs

import (
	"strings"
	"testing"
)

func TestCgroupNames(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for cg, want := range map[string]bool{
		"12:memory:/docker/" + id + "\n":               true, // cgroup v1, cgroupfs driver
		"0::/system.slice/docker-" + id + ".scope\n":   true, // cgroup v2, systemd driver
		"12:memory:/docker/" + id + "0\n":              false,
		"12:memory:/docker/" + id[:12] + "\n":          false, // a short ID is not the container's
		"0::/user.slice/" + id + "-not-it\n":           false,
		"12:memory:/\n0::/init.scope\n":                false,
		"12:memory:/docker/other\n1:cpu:/docker/" + id: true,
	} {
		if got := cgroupNames([]byte(cg), id); got != want {
			t.Errorf("cgroupNames(%q) = %t, want %t", cg, got, want)
		}
	}
}
