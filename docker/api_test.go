package docker

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mafsandbox/engine/label"
)

func TestCreateOptions(t *testing.T) {
	pids := func(n int64) *int64 { return &n }
	cases := []struct {
		name    string
		opts    []CreateOpt
		check   func(t *testing.T, cfg *container.Config, hc *container.HostConfig)
		wantErr error
	}{
		{"defaults: no network, keep-alive command", nil, func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
			if hc.NetworkMode != "none" || !reflect.DeepEqual(cfg.Cmd, KeepAlive()) || cfg.Image != "img" || len(cfg.Env) != 0 {
				t.Fatalf("config %+v host %+v", cfg, hc)
			}
			if hc.SecurityOpt != nil || hc.PidsLimit != nil || hc.CapDrop != nil || hc.Memory != 0 || hc.NanoCPUs != 0 {
				t.Fatalf("hardening set without its option: %+v", hc)
			}
		}, nil},
		{"no new privileges", []CreateOpt{withNoNewPrivileges()}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if !reflect.DeepEqual(hc.SecurityOpt, []string{"no-new-privileges"}) {
				t.Fatalf("SecurityOpt %v", hc.SecurityOpt)
			}
		}, nil},
		{"pids limit", []CreateOpt{withPidsLimit(512)}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if !reflect.DeepEqual(hc.PidsLimit, pids(512)) {
				t.Fatalf("PidsLimit %v", hc.PidsLimit)
			}
		}, nil},
		{"cap drop all", []CreateOpt{withCapDropAll()}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if !reflect.DeepEqual(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 {
				t.Fatalf("CapDrop %v CapAdd %v", hc.CapDrop, hc.CapAdd)
			}
		}, nil},
		{"the configuration's defaults drop every capability", DefaultConfig().WorkloadOpts(), func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if !reflect.DeepEqual(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 {
				t.Fatalf("CapDrop %v CapAdd %v", hc.CapDrop, hc.CapAdd)
			}
		}, nil},
		{"capabilities given back", Config{CapAdd: []string{"SETUID", "setgid"}}.WorkloadOpts(), func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if !reflect.DeepEqual(hc.CapDrop, []string{"ALL"}) || !reflect.DeepEqual(hc.CapAdd, []string{"SETUID", "SETGID"}) {
				t.Fatalf("CapDrop %v CapAdd %v", hc.CapDrop, hc.CapAdd)
			}
		}, nil},
		{"memory parsed as the client parses it", []CreateOpt{withMemory("512m")}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if hc.Memory != 512<<20 {
				t.Fatalf("Memory %d", hc.Memory)
			}
		}, nil},
		{"unreadable memory", []CreateOpt{withMemory("lots")}, nil, ErrInvalid},
		{"cpus as nano-CPUs", []CreateOpt{withCPUs(1.5)}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if hc.NanoCPUs != 1_500_000_000 {
				t.Fatalf("NanoCPUs %d", hc.NanoCPUs)
			}
		}, nil},
		{"cpus too precise", []CreateOpt{withCPUs(1e-12)}, nil, ErrInvalid},
		{"network with proxy variables", []CreateOpt{WithNetwork("N-net", "http://N-proxy:3128")}, func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
			want := []string{"HTTPS_PROXY=http://N-proxy:3128", "HTTP_PROXY=http://N-proxy:3128", "https_proxy=http://N-proxy:3128", "http_proxy=http://N-proxy:3128"}
			if hc.NetworkMode != "N-net" || !reflect.DeepEqual(cfg.Env, want) {
				t.Fatalf("network %q env %v", hc.NetworkMode, cfg.Env)
			}
		}, nil},
		{"extra variables after the proxy's", []CreateOpt{WithEnv("TOKEN=p"), WithNetwork("N-net", "http://p:1")}, func(t *testing.T, cfg *container.Config, _ *container.HostConfig) {
			if len(cfg.Env) != 5 || cfg.Env[4] != "TOKEN=p" {
				t.Fatalf("env %v", cfg.Env)
			}
		}, nil},
		{"network none again", []CreateOpt{WithNetwork("N-net", "http://p:1"), WithNetworkNone()}, func(t *testing.T, cfg *container.Config, hc *container.HostConfig) {
			if hc.NetworkMode != "none" || len(cfg.Env) != 0 {
				t.Fatalf("network %q env %v", hc.NetworkMode, cfg.Env)
			}
		}, nil},
		{"labels, a later key winning", []CreateOpt{WithLabels(label.Label{Key: "a", Value: "1"}, label.Label{Key: "b", Value: "2"}, label.Label{Key: "a", Value: "3"})}, func(t *testing.T, cfg *container.Config, _ *container.HostConfig) {
			if !reflect.DeepEqual(cfg.Labels, map[string]string{"a": "3", "b": "2"}) {
				t.Fatalf("labels %v", cfg.Labels)
			}
		}, nil},
		{"command", []CreateOpt{WithCmd("true")}, func(t *testing.T, cfg *container.Config, _ *container.HostConfig) {
			if !reflect.DeepEqual(cfg.Cmd, []string{"true"}) {
				t.Fatalf("cmd %v", cfg.Cmd)
			}
		}, nil},
		{"cpus shared with the CLI rendering", []CreateOpt{withCPUs(2)}, func(t *testing.T, _ *container.Config, hc *container.HostConfig) {
			if hc.NanoCPUs != 2_000_000_000 {
				t.Fatalf("NanoCPUs %d", hc.NanoCPUs)
			}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := apiCreateOptions(NewCreateSpec("N", "img", tc.opts...))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.Name != "N" || got.Config == nil || got.HostConfig == nil {
				t.Fatalf("options %+v", got)
			}
			tc.check(t, got.Config, got.HostConfig)
		})
	}
}

func TestErrorClasses(t *testing.T) {
	// A real connection failure, from the client itself.
	c, err := client.New(client.WithHost("unix://" + filepath.Join(t.TempDir(), "none.sock")))
	if err != nil {
		t.Fatal(err)
	}
	_, connErr := c.Ping(context.Background(), client.PingOptions{})
	cases := []struct {
		name       string
		err        error
		class      error // apiClass
		status     int   // answerStatus
		unreachErr bool  // apiError matches ErrUnreachable
	}{
		{"connection failed", connErr, ErrUnreachable, 0, true},
		{"not found", cerrdefs.ErrNotFound.WithMessage("Error response from daemon: No such container: x"), ErrNotFound, 404, false},
		{"conflict has no shared class", cerrdefs.ErrConflict.WithMessage("Error response from daemon: Conflict"), nil, 409, false},
		{"server error", cerrdefs.ErrInternal.WithMessage("Error response from daemon: boom"), nil, 500, false},
		{"cancelled is no answer", fmt.Errorf("get: %w", context.Canceled), nil, 0, false},
		{"client-side error is no answer", errors.New("unable to decode"), nil, 0, false},
		{"frozen start refusal", &apiAnswer{status: 409, message: "Container x is paused, unpause the container before exec"}, nil, 409, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := apiClass(tc.err); got != tc.class {
				t.Fatalf("apiClass = %v, want %v", got, tc.class)
			}
			if got := answerStatus(tc.err); got != tc.status {
				t.Fatalf("answerStatus = %d, want %d", got, tc.status)
			}
			err := apiError([]string{"inspect", "x"}, tc.err, nil)
			if errors.Is(err, ErrUnreachable) != tc.unreachErr {
				t.Fatalf("apiError = %v; unreachable %t, want %t", err, errors.Is(err, ErrUnreachable), tc.unreachErr)
			}
			if errors.Is(err, ErrUnreachable) && errors.Is(err, ErrNotFound) {
				t.Fatalf("apiError = %v: an unreachable daemon read as absence", err)
			}
			var ce *CommandError
			if !tc.unreachErr && (!errors.As(err, &ce) || ce.ExitCode != tc.status || ce.Class != tc.class) {
				t.Fatalf("apiError = %#v, want a CommandError with status %d", err, tc.status)
			}
		})
	}
}

func TestPathStatEntry(t *testing.T) {
	cases := []struct {
		name string
		st   container.PathStat
		want Entry
	}{
		{"file", container.PathStat{Name: "f", Size: 7, Mode: 0o640}, Entry{Name: "f", Type: EntryFile, Typeflag: tar.TypeReg, Size: 7, Mode: 0o640, UID: -1, GID: -1}},
		{"directory has no size", container.PathStat{Name: "d", Size: 4096, Mode: fs.ModeDir | 0o755}, Entry{Name: "d", Type: EntryDir, Typeflag: tar.TypeDir, Mode: 0o755, UID: -1, GID: -1}},
		{"sticky directory", container.PathStat{Name: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777}, Entry{Name: "tmp", Type: EntryDir, Typeflag: tar.TypeDir, Mode: 0o1777, UID: -1, GID: -1}},
		{"setuid file", container.PathStat{Name: "su", Size: 1, Mode: fs.ModeSetuid | 0o755}, Entry{Name: "su", Type: EntryFile, Typeflag: tar.TypeReg, Size: 1, Mode: 0o4755, UID: -1, GID: -1}},
		{"symlink keeps its target", container.PathStat{Name: "l", Size: 11, Mode: fs.ModeSymlink | 0o777, LinkTarget: "/etc/passwd"},
			Entry{Name: "l", Type: EntrySymlink, Typeflag: tar.TypeSymlink, Mode: 0o777, UID: -1, GID: -1, LinkTarget: "/etc/passwd"}},
		{"fifo is other", container.PathStat{Name: "p", Mode: fs.ModeNamedPipe | 0o644}, Entry{Name: "p", Type: EntryOther, Typeflag: tar.TypeFifo, Mode: 0o644, UID: -1, GID: -1}},
		{"char device is other", container.PathStat{Name: "null", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}, Entry{Name: "null", Type: EntryOther, Typeflag: tar.TypeChar, Mode: 0o666, UID: -1, GID: -1}},
		{"socket is other", container.PathStat{Name: "s", Mode: fs.ModeSocket | 0o755}, Entry{Name: "s", Type: EntryOther, Mode: 0o755, UID: -1, GID: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := pathStatEntry(tc.st); *got != tc.want {
				t.Fatalf("pathStatEntry = %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestBinding(t *testing.T) {
	cases := []struct {
		name        string
		env         []string
		wantErr     error
		wantMessage string
		wantContext string
		wantHost    string
	}{
		{"named context", nil, nil, "", "fake", "unix:///fake.sock"},
		{"default context", []string{`FAKE_CONTEXT_JSON={"Name":"default","Endpoints":{"docker":{"Host":"unix:///pinned.sock"}}}`}, nil, "", "default", "unix:///pinned.sock"},
		{"tcp endpoint", []string{`FAKE_CONTEXT_JSON={"Name":"default","Endpoints":{"docker":{"Host":"tcp://10.0.0.1:2375"}}}`}, nil, "", "default", "tcp://10.0.0.1:2375"},
		{"null", []string{"FAKE_CONTEXT_JSON=null"}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"not JSON", []string{"FAKE_CONTEXT_JSON=hello"}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"empty host", []string{`FAKE_CONTEXT_JSON={"Name":"x","Endpoints":{"docker":{"Host":""}}}`}, ErrUnreachable, "resolve a context and endpoint", "", ""},
		{"client fails", []string{"FAKE_CONTEXT_EXIT=1", "FAKE_CONTEXT_JSON=", `FAKE_CONTEXT_STDERR=context "gone": context not found`},
			ErrUnreachable, "could not resolve its context", "", ""},
		{"ssh endpoint", []string{`FAKE_CONTEXT_JSON={"Name":"remote","Endpoints":{"docker":{"Host":"ssh://me@host:2222"}}}`}, nil, "", "remote", "ssh://me@host:2222"},
		{"npipe endpoint", []string{`FAKE_CONTEXT_JSON={"Name":"win","Endpoints":{"docker":{"Host":"npipe:////./pipe/docker_engine"}}}`}, ErrUnreachable, "cannot dial npipe:// endpoints", "", ""},
		{"fd endpoint", []string{`FAKE_CONTEXT_JSON={"Name":"fd","Endpoints":{"docker":{"Host":"fd://"}}}`}, ErrUnreachable, "", "", ""},
		{"ssh endpoint with a password", []string{`FAKE_CONTEXT_JSON={"Name":"remote","Endpoints":{"docker":{"Host":"ssh://me:secret@host"}}}`}, ErrUnreachable, "password", "", ""},
		{"missing TLS material", []string{`FAKE_CONTEXT_JSON={"Name":"t","Endpoints":{"docker":{"Host":"tcp://h:2376"}},"TLSMaterial":{"docker":["ca.pem"]},"Storage":{"MetadataPath":"/nonexistent/meta","TLSPath":"/nonexistent/tls"}}`},
			ErrUnreachable, "load the TLS material", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, logPath := newFakeAPI(t, tc.env...)
			t.Setenv("DOCKER_HOST", "tcp://live:2") // after construction: must not be seen
			b, err := a.Bind(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Bind err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if !strings.Contains(err.Error(), tc.wantMessage) || strings.Contains(err.Error(), "secret") {
					t.Fatalf("message %q lacks %q or shows the password", err, tc.wantMessage)
				}
				return
			}
			if b.Context != tc.wantContext || b.Endpoint != tc.wantHost {
				t.Fatalf("Bind = %+v, want %s at %s", b, tc.wantContext, tc.wantHost)
			}
			if again, err := a.Bind(context.Background()); err != nil || again != b {
				t.Fatalf("second Bind = %+v, %v", again, err)
			}
			wantClient := tc.wantHost
			if strings.HasPrefix(wantClient, "ssh://") {
				wantClient = sshAPIHost // the stream has no address of its own
			}
			if got := a.bound.load().client.DaemonHost(); got != wantClient {
				t.Fatalf("client host %q, want %q", got, wantClient)
			}
			log := readLog(t, logPath)
			if len(log) != 1 || !strings.HasSuffix(log[0], " context inspect --format {{json .}}") {
				t.Fatalf("binding ran %q, want exactly one context inspect", log)
			}
		})
	}
}

func TestBindingSingleFlight(t *testing.T) {
	a, logPath := newFakeAPI(t, "FAKE_CONTEXT_DELAY=0.3")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Bind(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if log := readLog(t, logPath); len(log) != 1 {
		t.Fatalf("%d context inspects under concurrent first use: %v", len(log), log)
	}
}

func TestBindingRetriesAfterFailure(t *testing.T) {
	a, logPath := newFakeAPI(t, "FAKE_CONTEXT_EXIT=1")
	for i := 0; i < 2; i++ {
		if _, err := a.Bind(context.Background()); err == nil {
			t.Fatal("bound although the client failed")
		}
	}
	if log := readLog(t, logPath); len(log) != 2 {
		t.Fatalf("a failed binding was not retried: %v", log)
	}
}

// TestAPIWithoutClientBinary: with no client binary, the captured DOCKER_HOST is the default
// context's endpoint, as the client would resolve it; without one, binding refuses.
func TestWithoutClientBinary(t *testing.T) {
	_, host := unixDaemon(t)
	cases := []struct {
		name     string
		env      map[string]string
		wantErr  error
		wantHost string
	}{
		{"captured DOCKER_HOST", map[string]string{"DOCKER_HOST": host, "DOCKER_CONTEXT": ""}, nil, host},
		{"no DOCKER_HOST", map[string]string{"DOCKER_HOST": "", "DOCKER_CONTEXT": ""}, ErrClientNotFound, ""},
		{"a context the client would have to resolve", map[string]string{"DOCKER_HOST": host, "DOCKER_CONTEXT": "other"}, ErrClientNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			a, err := NewEngine(Config{DockerPath: "/nonexistent/docker"})
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("DOCKER_HOST", "unix:///live.sock")
			b, err := a.Bind(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Bind = %+v, %v; want %v", b, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if b.Context != "default" || b.Endpoint != tc.wantHost {
				t.Fatalf("Bind = %+v", b)
			}
			if osName, err := a.ServerOS(context.Background()); err != nil || osName != "linux" {
				t.Fatalf("ServerOS = %q, %v", osName, err)
			}
		})
	}
}

// TestAPIContextTLS: a named context's TLS material is loaded at binding, and only then: the
// daemon requires the client certificate, and moving the material away afterwards changes
// nothing.
func TestContextTLS(t *testing.T) {
	store := t.TempDir()
	tlsDir := filepath.Join(store, "tls", "docker")
	if err := os.MkdirAll(tlsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, host := tlsDaemon(t, tlsDir)
	cases := []struct {
		name    string
		files   []string
		wantErr bool
	}{
		{"CA and client pair", []string{"ca.pem", "cert.pem", "key.pem"}, false},
		{"no client pair", []string{"ca.pem"}, true},
		{"no TLS at all", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newFakeAPI(t, "FAKE_CONTEXT_JSON="+contextJSON(t, "tlsctx", host, store, tc.files...))
			if _, err := a.Bind(context.Background()); err != nil {
				t.Fatal(err)
			}
			osName, err := a.ServerOS(context.Background())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ServerOS = %q: the daemon served a client without its certificate", osName)
				}
				return
			}
			if err != nil || osName != "linux" {
				t.Fatalf("ServerOS = %q, %v", osName, err)
			}
			moved := tlsDir + ".moved"
			if err := os.Rename(tlsDir, moved); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(moved, tlsDir)
			if _, err := a.ServerOS(context.Background()); err != nil {
				t.Fatalf("ServerOS after the material moved = %v: it was not loaded at binding", err)
			}
		})
	}
	if d.requests.Load() == 0 {
		t.Fatal("the TLS daemon served nothing")
	}
}

// TestAPIContextDeletedOrChanged: once bound to a named context, the API refuses (unreachable,
// before any daemon call) when that context is deleted or points elsewhere, and never follows
// it.
func TestContextDeletedOrChanged(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, store string)
	}{
		{"deleted", func(t *testing.T, store string) {
			if err := os.RemoveAll(filepath.Join(store, "meta")); err != nil {
				t.Fatal(err)
			}
		}},
		{"pointed elsewhere", func(t *testing.T, store string) {
			_, other := unixDaemon(t)
			writeMeta(t, store, "ctx", other)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, host := unixDaemon(t)
			store := t.TempDir()
			a, _ := newFakeAPI(t, "FAKE_CONTEXT_JSON="+contextJSON(t, "ctx", host, store))
			if osName, err := a.ServerOS(context.Background()); err != nil || osName != "linux" {
				t.Fatalf("ServerOS = %q, %v", osName, err)
			}
			served := d.requests.Load()
			tc.change(t, store)
			_, err := a.Inspect(context.Background(), "maf-sandbox-docker-000000000000")
			if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) {
				t.Fatalf("Inspect = %v, want ErrUnreachable", err)
			}
			if d.requests.Load() != served {
				t.Fatal("a call reached the daemon after its context changed")
			}
		})
	}
}

// TestBindingBounded: the context inspect runs under Config.CommandTimeout, and the caller's
// context ends it too; either way the client and what it started (the fake's sleep, which
// outlives a client killed alone) are killed and reaped.
func TestBindingBounded(t *testing.T) {
	cases := []struct {
		name    string
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
		want    error
	}{
		{"its own budget", 200 * time.Millisecond, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, ErrTimeout},
		{"the caller's deadline", time.Minute, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := fakeClient(t, "FAKE_CONTEXT_DELAY=30.217")
			cfg.CommandTimeout = tc.timeout
			e, err := NewEngine(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err = e.Bind(ctx)
			if !errors.Is(err, tc.want) || (tc.want == ErrTimeout) == errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Bind = %v, want %v", err, tc.want)
			}
			waitNoChildren(t)
			if left := processesWithCmdline(t, "sleep\x0030.217"); len(left) > 0 {
				t.Fatalf("the client's child outlived binding: %v", left)
			}
		})
	}
}
