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
	"github.com/mafsandbox/engine/cmd/engine/internal/version"
	"github.com/mafsandbox/engine/messages"
)

// The version is one value, from the binary's module information: what "engine version"
// prints, what serve logs at start, and what health and the micro service's INFO report.
func TestVersionAgrees(t *testing.T) {
	bin := buildEngine(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("read the binary's build info: %v", err)
	}
	want := version.From(info)
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
