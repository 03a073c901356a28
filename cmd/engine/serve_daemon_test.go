package main

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/execwire"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/service"
)

// engine serve whose daemon does not answer says so at start, at error level, naming the
// endpoint it looked at; it serves, its health reports the daemon unreachable, and once a
// daemon answers at that endpoint health says so.
func TestServeSaysTheDaemonCannotBeReached(t *testing.T) {
	bin := buildEngine(t)
	dir, err := os.MkdirTemp("", "dead-daemon") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	url, log, _ := serveEngineEnv(t, bin, []string{"DOCKER_HOST=unix://" + sock, "DOCKER_CONTEXT="}, "--exec-channel=false")

	var said map[string]any
	for _, line := range strings.Split(log.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), "the Docker daemon cannot be reached") {
			said = m
		}
	}
	if said == nil || said["level"] != "error" || said["endpoint"] != "unix://"+sock || said["error"] == nil {
		t.Fatalf("no error-level line naming the endpoint unix://%s:\n%s", sock, log.String())
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if h := serveHealth(t, nc); h.Status != service.HealthEngineUnavailable || h.Daemon == nil || h.Daemon.Reachable {
		t.Fatalf("health with no daemon at the endpoint: %+v (daemon %+v)", h, h.Daemon)
	}
	// A daemon now answers at that endpoint: the real one, through a relay on the socket.
	relay(t, sock, "/var/run/docker.sock")
	if h := serveHealth(t, nc); h.Status != service.HealthOK || h.Daemon == nil || !h.Daemon.Reachable {
		t.Fatalf("health once the daemon answers: %+v (daemon %+v)", h, h.Daemon)
	}
}

// serveHealth asks the engine's health.
func serveHealth(t *testing.T, nc *nats.Conn) messages.APIHealthResponse {
	t.Helper()
	req, _ := json.Marshal(messages.APIHealthRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIHealthRequestType}})
	msg, err := nc.Request(messages.SubjectHealth, req, 30*time.Second)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	var h messages.APIHealthResponse
	if err := json.Unmarshal(msg.Data, &h); err != nil {
		t.Fatalf("health reply %s: %v", msg.Data, err)
	}
	return h
}

// relay listens on the unix socket at from and joins each connection to the one at to, until
// the test ends.
func relay(t *testing.T, from, to string) {
	t.Helper()
	ln, err := net.Listen("unix", from)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) || err != nil {
				return
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("unix", to)
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c) }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()
}

// A binary from a plain go build, started outside the source tree, still gives closed
// sandboxes the exec channel's supervisor: it finds the source it was built from and builds
// the supervisor there, where it used to warn that the channel was off.
func TestPlainBuildServesTheExecChannelAnywhere(t *testing.T) {
	bin := buildEngine(t)
	url, log, _ := serveEngineIn(t, t.TempDir(), bin, nil)
	if strings.Contains(log.String(), "exec channel off") {
		t.Fatalf("serve outside the tree turned the exec channel off:\n%s", log.String())
	}
	r := runEngine(t, bin, nil, "run", "--nats-url", url, "--image", dockertest.Busybox(t), "--scope", "cmd-plain-build-"+dockertest.Process(),
		"--shell", "tr '\\0' ' ' < /proc/1/cmdline")
	if r.code != 0 || !strings.HasPrefix(r.stdout, execwire.Binary+" ") {
		t.Fatalf("engine run: exit %d, pid 1 %q (stderr %s); want the supervisor %s as pid 1", r.code, r.stdout, r.stderr, execwire.Binary)
	}
}
