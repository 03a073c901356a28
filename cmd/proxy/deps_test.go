package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The proxy runs inside every egress container and is standard library apart from the
// decision-log grammar (package egresslog). The NATS delivery of egress events lives in
// package events so that this binary does not link the NATS client; this test keeps it so.
func TestProxyLinksNoNATS(t *testing.T) {
	// go test puts the go command that runs it first on PATH, so this is the same toolchain
	// (runtime.GOROOT is deprecated for finding it).
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/proxy: %v\n%s", err, stderr.Bytes())
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/mafsandbox/engine/cmd/proxy" {
		t.Fatalf("go list -deps listed %d packages and not the proxy last: %q", len(deps), out)
	}
	var bad []string
	for _, dep := range deps {
		if strings.Contains(dep, "nats-io") || dep == "github.com/mafsandbox/engine/events" {
			bad = append(bad, dep)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("cmd/proxy links NATS through %v; NATS delivery belongs in package events, which the proxy must not import", bad)
	}
}
