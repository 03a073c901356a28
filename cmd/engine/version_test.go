package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/messages"
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
		{name: "devel without VCS", version: "(devel)", want: devVersion},
		{name: "no version at all", want: devVersion},
		{name: "a revision semver cannot carry", version: "(devel)", settings: vcs("not/a+rev", "false"), want: devVersion},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/mafsandbox/engine", Version: tc.version}, Settings: tc.settings}
			got := versionFrom(info)
			if got != tc.want {
				t.Fatalf("versionFrom(%q, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
			}
			if !semverRE.MatchString(got) {
				t.Fatalf("versionFrom gave %q, which the micro service would refuse", got)
			}
		})
	}
}

// The version is one value, from the binary's module information: what "engine version"
// prints, what serve logs at start, and what health and the micro service's INFO report.
func TestVersionAgrees(t *testing.T) {
	bin := buildEngine(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("read the binary's build info: %v", err)
	}
	want := versionFrom(info)
	if rev, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && hasVCS(info) {
		// Built from a checkout Go could stamp: the version names the commit.
		if r := strings.TrimSpace(string(rev)); !strings.Contains(want, r[:12]) {
			t.Fatalf("version %q does not name the commit %s", want, r)
		}
	}
	r := runEngine(t, bin, nil, "version")
	if r.code != 0 || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("engine version: exit %d, printed %q; want %q", r.code, r.stdout, want)
	}

	url, log := serveEngine(t, bin)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	backend, err := client.New(ctx, nc)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	h, err := backend.Health(ctx)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	if h.Version != want {
		t.Fatalf("health reports version %q, want %q", h.Version, want)
	}
	msg, err := nc.RequestWithContext(ctx, "$SRV.INFO."+messages.ServiceName, nil)
	if err != nil {
		t.Fatalf("$SRV.INFO: %v", err)
	}
	var srvInfo struct{ Version string }
	if err := json.Unmarshal(msg.Data, &srvInfo); err != nil || srvInfo.Version != want {
		t.Fatalf("$SRV.INFO reports version %q (%v), want %q", srvInfo.Version, err, want)
	}
	logged := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	for sc.Scan() {
		var line struct{ Msg, Version string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Version != "" {
			logged[line.Msg] = line.Version
		}
	}
	for _, msg := range []string{"engine ready", "engine serving"} {
		if logged[msg] != want {
			t.Errorf("log line %q carries version %q, want %q (versions logged: %v)", msg, logged[msg], want, logged)
		}
	}
}

func hasVCS(info *debug.BuildInfo) bool {
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return true
		}
	}
	return false
}
