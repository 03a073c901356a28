package docker_test

// ssh:// for real: a container of the sshd image plays the remote Docker host (Debian's
// openssh-server and docker client, with this daemon's socket), reached through a docker
// context by the system's ssh.

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// sshKeys are the keys of one test: the remote host's and another host's, the user's key the
// remote host accepts and another one it does not know.
type sshKeys struct {
	dir                                  string
	hostKey, hostPub, otherHostPub       string // files
	userKey, otherUserKey, authorizedKey string // files
}

func newSSHKeys(t testing.TB) sshKeys {
	t.Helper()
	dir := t.TempDir()
	gen := func(name string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %s: %v: %s", name, err, out)
		}
		return p
	}
	k := sshKeys{dir: dir, hostKey: gen("host"), userKey: gen("user"), otherUserKey: gen("other-user")}
	k.hostPub, k.otherHostPub = k.hostKey+".pub", gen("other-host")+".pub"
	k.authorizedKey = k.userKey + ".pub"
	return k
}

// startSSHD runs a container of the sshd image with keys' host key and the user's key
// authorized for root, extra docker run flags added, and returns its ID and address once sshd
// accepts connections.
func startSSHD(t testing.TB, image string, keys sshKeys, extra ...string) (id, addr string) {
	t.Helper()
	args := append([]string{"-v", keys.hostKey + ":/etc/ssh/ssh_host_ed25519_key:ro",
		"-v", keys.authorizedKey + ":/root/.ssh/authorized_keys:ro"}, extra...)
	id = dockertest.RunContainerCmd(t, image, []string{"/usr/sbin/sshd", "-D", "-e"}, args...)
	addr = dockertest.Docker(t, "inspect", "--format", "{{.NetworkSettings.IPAddress}}", id)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "22"), time.Second)
		if err == nil {
			c.Close()
			return id, addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd at %s: %v\n%s", addr, err, sshdLog(t, id))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sshdLog is what sshd wrote (to stderr, with -e).
func sshdLog(t testing.TB, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdout, stderr, err := dockertest.DockerErr(ctx, "logs", id)
	if err != nil {
		t.Fatalf("docker logs: %v", err)
	}
	return string(stdout) + string(stderr)
}

// sshClient is how the engine's ssh is set up: the key it logs in with and the known-hosts
// lines it trusts.
type sshClient struct {
	identity   string
	knownHosts string
	extra      string // more ssh_config lines, each "  Key value\n"
}

// sshEngine returns an engine built with a docker context named "remote" whose endpoint is
// ssh://root@addr, and the system's ssh configured as c (through a wrapper named ssh first on
// PATH): DOCKER_CONFIG, DOCKER_CONTEXT and PATH are set while the engine captures the
// environment, and put back right after, so the engine works only from what it captured.
func sshEngine(t testing.TB, addr string, c sshClient) *docker.Engine {
	t.Helper()
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "docker")
	if out, err := exec.Command("docker", "--config", cfgDir, "context", "create", "remote",
		"--docker", "host=ssh://root@"+addr).CombinedOutput(); err != nil {
		t.Fatalf("docker context create: %v: %s", err, out)
	}
	known := filepath.Join(dir, "known_hosts")
	sshConfig := filepath.Join(dir, "ssh_config")
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(known, c.knownHosts, 0o600)
	write(sshConfig, "Host *\n  IdentityFile "+c.identity+"\n  IdentitiesOnly yes\n  UserKnownHostsFile "+known+
		"\n  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n"+c.extra, 0o600)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(bin, "ssh"), "#!/bin/sh\nexec /usr/bin/ssh -F "+sshConfig+" \"$@\"\n", 0o755)
	var e *docker.Engine
	withEnv(t, map[string]string{"DOCKER_CONFIG": cfgDir, "DOCKER_CONTEXT": "remote", "DOCKER_HOST": "",
		"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH")}, func() { e = newEngine(t) })
	return e
}

// withEnv runs fn with env set in the process environment, then puts the earlier values back.
func withEnv(t testing.TB, env map[string]string, fn func()) {
	t.Helper()
	before := map[string]string{}
	for k, v := range env {
		before[k] = os.Getenv(k)
		t.Setenv(k, v) // also put back when the test ends
	}
	fn()
	for k, v := range before {
		t.Setenv(k, v)
	}
}

// knownHost is the known-hosts line of the key in the .pub file pub for addr.
func knownHost(t testing.TB, addr, pub string) string {
	t.Helper()
	b, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return addr + " " + f[0] + " " + f[1] + "\n"
}

// wantSSHError fails t unless err is an ssh failure of exit status code: unreachable, never
// an absence, with ssh's own words for the user in its message (phrase).
func wantSSHError(t *testing.T, err error, code int, phrase string) *docker.SSHError {
	t.Helper()
	var se *docker.SSHError
	if !errors.As(err, &se) || se.ExitCode != code || !errors.Is(err, docker.ErrUnreachable) || errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("err = %v, want an *SSHError exiting %d that is ErrUnreachable", err, code)
	}
	if !strings.Contains(err.Error(), phrase) {
		t.Fatalf("message %q does not tell the user %q", err, phrase)
	}
	return se
}

// TestEngineOverSSH drives the daemon through an ssh:// docker context: key authentication
// against a host the known-hosts file holds works for every kind of call, and each way it
// can fail gives the typed error a user expects: an unknown or changed host key and a key the
// host refuses (ssh's exit 255), a remote docker that reaches no daemon (1), a remote host
// without docker (127, also ErrClientNotFound), and a connection that drops in the middle of
// an exec.
func TestEngineOverSSH(t *testing.T) {
	image := dockertest.SSHD(t)
	busybox := dockertest.Busybox(t)
	local := newEngine(t)
	b, err := local.Bind(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	sock, ok := strings.CutPrefix(b.Endpoint, "unix://")
	if !ok {
		t.Skipf("the daemon is at %s, not on a local socket the sshd container can be lent", b.Endpoint)
	}
	keys := newSSHKeys(t)
	lendSocket := []string{"-v", sock + ":/var/run/docker.sock"}
	id, addr := startSSHD(t, image, keys, lendSocket...)
	trusted := sshClient{identity: keys.userKey, knownHosts: knownHost(t, addr, keys.hostPub)}

	t.Run("key authentication and a known host", func(t *testing.T) {
		e := sshEngine(t, addr, trusted)
		ctx := testCtx(t)
		if b, err := e.Bind(ctx); err != nil || b.Context != "remote" || b.Endpoint != "ssh://root@"+addr {
			t.Fatalf("Bind = %+v, %v", b, err)
		}
		if osName, err := e.ServerOS(ctx); err != nil || osName != "linux" {
			t.Fatalf("ServerOS = %q, %v", osName, err)
		}
		remoteID, err := e.EngineID(ctx)
		localID, lerr := local.EngineID(ctx)
		if err != nil || lerr != nil || remoteID != localID {
			t.Fatalf("EngineID over ssh %q (%v), locally %q (%v): want the one daemon", remoteID, err, localID, lerr)
		}
		name, _ := workload(t, e, busybox, testKey(t))
		out, err := e.Exec(ctx, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if err != nil || out.ExitCode != 3 || string(out.Stdout) != "out\n" || string(out.Stderr) != "err\n" {
			t.Fatalf("Exec = %+v, %v", out, err)
		}
		tarball, err := docker.BuildTar(docker.FileEntry("/tmp/over-ssh", []byte("sent"), 0o644, 0, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CopyIn(ctx, name, tarball); err != nil {
			t.Fatalf("CopyIn = %v", err)
		}
		if _, body, err := e.Read(ctx, name, "/tmp/over-ssh", 100); err != nil || string(body) != "sent" {
			t.Fatalf("Read = %q, %v", body, err)
		}
		if logs := sshdLog(t, id); !strings.Contains(logs, "Accepted publickey for root") {
			t.Fatalf("sshd logged no key login:\n%s", logs)
		}
	})
	t.Run("an unknown host key is refused", func(t *testing.T) {
		e := sshEngine(t, addr, sshClient{identity: keys.userKey})
		_, err := e.ServerOS(testCtx(t))
		wantSSHError(t, err, 255, "Host key verification failed")
	})
	t.Run("a changed host key is refused", func(t *testing.T) {
		e := sshEngine(t, addr, sshClient{identity: keys.userKey, knownHosts: knownHost(t, addr, keys.otherHostPub)})
		_, err := e.ServerOS(testCtx(t))
		wantSSHError(t, err, 255, "Host key verification failed")
	})
	t.Run("a key the host does not accept", func(t *testing.T) {
		e := sshEngine(t, addr, sshClient{identity: keys.otherUserKey, knownHosts: trusted.knownHosts})
		_, err := e.ServerOS(testCtx(t))
		wantSSHError(t, err, 255, "Permission denied")
	})
	t.Run("a remote host without docker", func(t *testing.T) {
		bare, bareAddr := startSSHD(t, image, keys) // no socket lent
		c := sshClient{identity: keys.userKey, knownHosts: knownHost(t, bareAddr, keys.hostPub)}
		_, err := sshEngine(t, bareAddr, c).ServerOS(testCtx(t))
		if se := wantSSHError(t, err, 1, "dial unix /var/run/docker.sock"); errors.Is(se, docker.ErrClientNotFound) {
			t.Fatalf("err = %v: the remote docker is there", err)
		}
		dockertest.Docker(t, "exec", bare, "rm", "/usr/bin/docker")
		_, err = sshEngine(t, bareAddr, c).ServerOS(testCtx(t))
		wantSSHError(t, err, 127, "docker")
		if !errors.Is(err, docker.ErrClientNotFound) {
			t.Fatalf("err = %v, want ErrClientNotFound too", err)
		}
	})
	t.Run("the connection drops in the middle of an exec", func(t *testing.T) {
		doomed, doomedAddr := startSSHD(t, image, keys, lendSocket...)
		e := sshEngine(t, doomedAddr, sshClient{identity: keys.userKey, knownHosts: knownHost(t, doomedAddr, keys.hostPub)})
		name, _ := workload(t, local, busybox, testKey(t)) // created and removed locally: the ssh host goes
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := e.ExecWithStart(context.Background(), docker.ExecRequest{Target: name, Argv: []string{"sleep", "60"}},
				func() { close(started) })
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			t.Fatalf("the exec ended before it started: %v", err)
		}
		dockertest.Docker(t, "rm", "--force", doomed)
		select {
		case err := <-done:
			wantSSHError(t, err, 255, "")
		case <-time.After(time.Minute):
			t.Fatal("the exec still waits a minute after its connection dropped")
		}
	})
}

// BenchmarkInspectOverSSH measures one control call (an inspect of a running container) over
// the daemon's unix socket, over ssh:// with a fresh ssh connection per call (the engine's
// default), and over ssh:// with the user's ssh multiplexing one connection (ControlMaster).
// Run with
//
//	go test -run '^$' -bench InspectOverSSH -benchtime 50x ./docker
func BenchmarkInspectOverSSH(b *testing.B) {
	image := dockertest.SSHD(b)
	busybox := dockertest.Busybox(b)
	local := newEngine(b)
	bnd, err := local.Bind(context.Background())
	sock, ok := strings.CutPrefix(bnd.Endpoint, "unix://")
	if err != nil || !ok {
		b.Skipf("the daemon is at %s (%v), not on a local socket", bnd.Endpoint, err)
	}
	keys := newSSHKeys(b)
	_, addr := startSSHD(b, image, keys, "-v", sock+":/var/run/docker.sock")
	trusted := sshClient{identity: keys.userKey, knownHosts: knownHost(b, addr, keys.hostPub)}
	name, _ := workload(b, local, busybox, testKey(b))
	control := filepath.Join(b.TempDir(), "cm")
	muxed := trusted
	muxed.extra = "  ControlMaster auto\n  ControlPath " + control + "\n  ControlPersist 30s\n"
	b.Cleanup(func() { _ = exec.Command("ssh", "-o", "ControlPath="+control, "-O", "exit", "root@"+addr).Run() })
	for _, tc := range []struct {
		name string
		e    *docker.Engine
	}{
		{"unix", local},
		{"ssh", sshEngine(b, addr, trusted)},
		{"ssh_controlmaster", sshEngine(b, addr, muxed)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := tc.e.Inspect(context.Background(), name); err != nil { // bound, negotiated
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := tc.e.Inspect(context.Background(), name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
