package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mafsandbox/engine/internal/dockertest"
)

// fakeSSH stands in for ssh: it logs its arguments to FAKE_SSH_LOG, then acts out
// FAKE_SSH_MODE: bridge (what sshd and the remote docker would do: the local docker client's
// dial-stdio), or a failure as ssh or the remote host report it.
const fakeSSH = `#!/bin/sh
[ -n "$FAKE_SSH_LOG" ] && printf '%s\n' "$*" >> "$FAKE_SSH_LOG"
case "$FAKE_SSH_MODE" in
bridge) exec "$FAKE_SSH_DOCKER" system dial-stdio ;;
hostkey) echo "Host key verification failed." >&2; exit 255 ;;
refused) echo "ssh: connect to host remote.example port 22: Connection refused" >&2; exit 255 ;;
nodocker) echo "bash: line 1: docker: command not found" >&2; exit 127 ;;
nodaemon) echo "failed to open the raw stream connection: dial unix /var/run/docker.sock: connect: no such file or directory" >&2; exit 1 ;;
esac
exit 99
`

// sshEngine returns an engine bound (through the fake client) to endpoint, with the fake ssh
// first on the PATH it captures in mode, and the path of the fake ssh's log.
func sshEngine(t *testing.T, endpoint, mode string) (*Engine, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "ssh.log")
	t.Setenv("FAKE_SSH_LOG", logPath)
	t.Setenv("FAKE_SSH_MODE", mode)
	if mode == "bridge" {
		real, err := exec.LookPath("docker")
		if err != nil {
			t.Fatalf("the bridge needs the docker client: %v", err)
		}
		t.Setenv("FAKE_SSH_DOCKER", real)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	e, _ := newFakeAPI(t, `FAKE_CONTEXT_JSON={"Name":"remote","Endpoints":{"docker":{"Host":"`+endpoint+`"}}}`)
	return e, logPath
}

// TestSSHDialer: an ssh:// endpoint runs the ssh found on the PATH captured at construction
// (a later PATH is not followed) with the endpoint's user, port and host, batch mode and the
// remote dial-stdio, one ssh per connection, none left once the calls return; ssh's failures
// are typed by its exit status, never read from its words, and reach the caller whatever the
// words say.
func TestSSHDialer(t *testing.T) {
	dockertest.Require(t)
	t.Run("a working stream", func(t *testing.T) {
		e, logPath := sshEngine(t, "ssh://me@remote.example:2222", "bridge")
		t.Setenv("PATH", "/nonexistent") // after construction: not followed
		defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
		ctx := testCtx(t)
		if osName, err := e.ServerOS(ctx); err != nil || osName != "linux" {
			t.Fatalf("ServerOS over ssh = %q, %v", osName, err)
		}
		if _, err := e.Inspect(ctx, "maf-sandbox-docker-000000000000"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Inspect of an absent container over ssh = %v, want ErrNotFound", err)
		}
		log := readLog(t, logPath)
		want := "-o ConnectTimeout=30 -o BatchMode=yes -T -l me -p 2222 -- remote.example docker system dial-stdio"
		if len(log) < 2 || log[0] != want {
			t.Fatalf("ssh ran %q, want %q for each connection", log, want)
		}
		waitNoChildren(t)
	})
	cases := []struct {
		name     string
		mode     string
		code     int
		want     error
		wantMore error
	}{
		{"ssh refuses (a host key, a login)", "hostkey", 255, ErrUnreachable, nil},
		// The Moby client swaps an error that reads "connection refused" or "dial unix" for
		// its own; the call still returns ssh's.
		{"ssh reaches no sshd", "refused", 255, ErrUnreachable, nil},
		{"the remote host has no docker", "nodocker", 127, ErrUnreachable, ErrClientNotFound},
		{"the remote docker reaches no daemon", "nodaemon", 1, ErrUnreachable, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := sshEngine(t, "ssh://me@remote.example", tc.mode)
			_, err := e.ServerOS(testCtx(t))
			var se *SSHError
			if !errors.As(err, &se) || se.ExitCode != tc.code || se.Host != "me@remote.example" || !errors.Is(err, tc.want) {
				t.Fatalf("ServerOS = %v, want an *SSHError exiting %d that is %v", err, tc.code, tc.want)
			}
			if tc.wantMore != nil && !errors.Is(err, tc.wantMore) {
				t.Fatalf("ServerOS = %v, want it to be %v too", err, tc.wantMore)
			}
			if tc.wantMore == nil && errors.Is(err, ErrClientNotFound) || errors.Is(err, ErrNotFound) {
				t.Fatalf("ServerOS = %v: a class it is not", err)
			}
			if len(se.Stderr) == 0 || !strings.Contains(err.Error(), strings.TrimSpace(string(se.Stderr))) {
				t.Fatalf("message %q does not carry ssh's words %q", err, se.Stderr)
			}
			waitNoChildren(t)
		})
	}
}

// TestSSHDialerStreamDies: ssh killed while an exec's output stream is open fails the exec
// as unreachable, with ssh's end, and leaves no ssh behind.
func TestSSHDialerStreamDies(t *testing.T) {
	image := dockertest.Busybox(t)
	local, err := NewEngine(Config{Labels: dockertest.Labels()})
	if err != nil {
		t.Fatal(err)
	}
	name := "maf-sandbox-test-sshdie-" + dockertest.Process()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = local.Remove(ctx, name)
	})
	if _, err := local.Run(testCtx(t), NewCreateSpec(name, image)); err != nil {
		t.Fatal(err)
	}
	e, _ := sshEngine(t, "ssh://me@remote.example", "bridge")
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.ExecWithStart(testCtx(t), ExecRequest{Target: name, Argv: []string{"sleep", "60"}}, func() { close(started) })
		done <- err
	}()
	<-started
	sshs := processes(t, func(_, ppid int, cl string) bool { return ppid == os.Getpid() && strings.Contains(cl, "dial-stdio") })
	if len(sshs) == 0 {
		t.Fatal("no ssh carries the exec's stream")
	}
	for _, p := range sshs {
		var pid int
		if _, err := fmt.Sscan(p, &pid); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	err = <-done
	var se *SSHError
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &se) {
		t.Fatalf("exec whose ssh died = %v, want ErrUnreachable with the *SSHError", err)
	}
	waitNoChildren(t)
}

// TestSSHEndpointRefusals: an ssh:// endpoint binding cannot honour is refused at binding,
// before any ssh runs.
func TestSSHEndpointRefusals(t *testing.T) {
	cases := []struct {
		name     string
		endpoint string
		path     string // the PATH captured; "" keeps the fake ssh's
		want     error
	}{
		{"a password", "ssh://me:pw@host", "", ErrUnreachable},
		{"a query", "ssh://host?x=1", "", ErrUnreachable},
		{"a host like an option", "ssh://-oProxyCommand=x", "", ErrUnreachable},
		{"a user like an option", "ssh://-oProxyCommand=x@host", "", ErrUnreachable},
		{"a quote in the socket path", "ssh://host/run/d'ocker.sock", "", ErrUnreachable},
		{"no ssh on PATH", "ssh://host", "/nonexistent", ErrClientNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, logPath := sshEngine(t, tc.endpoint, "hostkey")
			if tc.path != "" {
				// A PATH without ssh, captured by a new engine.
				t.Setenv("PATH", tc.path)
				e, _ = newFakeAPI(t, `FAKE_CONTEXT_JSON={"Name":"remote","Endpoints":{"docker":{"Host":"`+tc.endpoint+`"}}}`)
			}
			_, err := e.Bind(testCtx(t))
			if !errors.Is(err, tc.want) || strings.Contains(err.Error(), "pw@") {
				t.Fatalf("Bind = %v, want %v (and no password shown)", err, tc.want)
			}
			if log := readLog(t, logPath); len(log) > 1 || log[0] != "" {
				t.Fatalf("ssh ran: %q", log)
			}
		})
	}
}

// TestSSHRemoteSocket: a socket path in the endpoint names the remote daemon's socket, quoted
// for the remote shell.
func TestSSHRemoteSocket(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := newSSHDialer("ssh://host/run/user/1000/docker.sock", []string{"PATH=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.args[len(d.args)-1], "docker '--host=unix:///run/user/1000/docker.sock' system dial-stdio"; got != want {
		t.Fatalf("remote command %q, want %q", got, want)
	}
}
