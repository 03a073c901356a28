package docker

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestUnixSocketEndpoints: every Docker-compatible socket the engine serves is a unix://
// endpoint of its own shape, named by a docker context; the engine dials each where its
// context says, whatever DOCKER_HOST says later.
func TestUnixSocketEndpoints(t *testing.T) {
	cases := []struct {
		name   string
		socket string // under a fresh directory standing in for / or a home
	}{
		{"Docker Engine, rootful", "var/run/docker.sock"},
		{"Docker Engine, rootless", "run/user/1000/docker.sock"},
		{"Docker Desktop", "home/.docker/run/docker.sock"},
		{"Colima", "home/.colima/default/docker.sock"},
		{"OrbStack", "home/.orbstack/run/docker.sock"},
		{"Rancher Desktop", "home/.rd/docker.sock"},
		{"Podman", "run/user/1000/podman/podman.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, host := daemonAt(t, tc.socket)
			e, _ := newFakeAPI(t, "FAKE_CONTEXT_JSON="+contextJSON(t, "ctx", host, t.TempDir()))
			t.Setenv("DOCKER_HOST", "unix:///nonexistent.sock") // after construction: not followed
			if osName, err := e.ServerOS(context.Background()); err != nil || osName != "linux" {
				t.Fatalf("ServerOS at %s = %q, %v", host, osName, err)
			}
			if d.requests.Load() == 0 {
				t.Fatalf("the daemon at %s served nothing", host)
			}
		})
	}
}

// daemonAt serves a fakeDaemon on a socket at rel under a fresh directory and returns its
// endpoint.
func daemonAt(t *testing.T, rel string) (*fakeDaemon, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: d}}
	srv.Start()
	t.Cleanup(srv.Close)
	return d, "unix://" + sock
}
