package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

// TestNetworksAndInventory holds the engine to its answers on the network seam and the reaper's
// inventory, against the real daemon.
func TestNetworksAndInventory(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "maf-sandbox-test-" + hex.EncodeToString(suffix)
	marker := map[string]string{"maf-sandbox-test.net": name}
	spec := docker.NetworkSpec{Name: name + "-net", Labels: []label.Label{{Key: "maf-sandbox-test.net", Value: name}}}

	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = e.Remove(c, name+"-proxy")
		_, _ = e.NetworkRemove(c, spec.Name)
	})
	netID, err := e.NetworkCreate(ctx, spec)
	if err != nil {
		t.Fatalf("NetworkCreate = %v", err)
	}
	if _, err := e.NetworkCreate(ctx, spec); !errors.Is(err, docker.ErrNetworkExists) {
		t.Fatalf("second NetworkCreate = %v, want ErrNetworkExists", err)
	}
	info, err := e.NetworkInspect(ctx, spec.Name)
	if err != nil || info.ID != netID || info.Name != spec.Name || info.Driver != "bridge" || !info.Internal ||
		info.Options[docker.OptGatewayModeIPv4] != docker.GatewayIsolated || info.Labels["maf-sandbox-test.net"] != name {
		t.Fatalf("NetworkInspect = %+v, %v", info, err)
	}
	for k, v := range dockertest.Labels() {
		if info.Labels[k] != v {
			t.Fatalf("network label %s = %q, want the config label %q", k, info.Labels[k], v)
		}
	}
	if _, err := e.NetworkInspect(ctx, name+"-nonet"); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("NetworkInspect of an absent network = %v", err)
	}

	proxy := docker.ProxySpec{Name: name + "-proxy", Image: image, Network: spec.Name,
		Env: []string{"A=1", "B=2"}, Labels: []label.Label{{Key: "maf-sandbox-test.net", Value: name}}}
	missing := proxy
	missing.Image = "maf-sandbox-test/absent:none"
	if _, err := e.ProxyCreate(ctx, missing); !errors.Is(err, docker.ErrImageMissing) {
		t.Fatalf("ProxyCreate of an absent image = %v, want ErrImageMissing", err)
	}
	proxyID, err := e.ProxyCreate(ctx, proxy)
	if err != nil {
		t.Fatalf("ProxyCreate = %v", err)
	}
	if _, err := e.ProxyCreate(ctx, proxy); !errors.Is(err, docker.ErrConflict) {
		t.Fatalf("second ProxyCreate = %v, want ErrConflict", err)
	}
	got := dockertest.Docker(t, "inspect", "--format",
		"{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.HostConfig.PidsLimit}} {{.HostConfig.Memory}} {{.Config.User}} {{.HostConfig.LogConfig.Type}} {{index .HostConfig.LogConfig.Config \"max-size\"}} {{index .HostConfig.LogConfig.Config \"max-file\"}} {{.HostConfig.NetworkMode}} {{.Config.Env}}",
		proxyID)
	want := "true [ALL] [no-new-privileges] 64 67108864 65532:65532 json-file 16m 2 " + spec.Name
	if len(got) < len(want) || got[:len(want)] != want {
		t.Fatalf("proxy hardening %q, want it to start %q", got, want)
	}
	if err := e.ProxyStart(ctx, proxyID); err != nil {
		t.Fatalf("ProxyStart = %v", err)
	}
	if err := e.ProxyStop(ctx, proxyID, time.Second); err != nil {
		t.Fatalf("ProxyStop = %v", err)
	}
	if _, err := e.ProxyLogs(ctx, proxyID, 10, 1024); err != nil {
		t.Fatalf("ProxyLogs = %v", err)
	}
	if err := e.NetworkConnect(ctx, "bridge", proxyID); err != nil {
		t.Fatalf("NetworkConnect = %v", err)
	}
	if err := e.NetworkConnect(ctx, spec.Name, name+"-noctr"); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("NetworkConnect of an absent container = %v", err)
	}

	// A running container keeps an endpoint on the network (a stopped proxy does not).
	member := dockertest.RunContainer(t, image, "--network", spec.Name)
	ids, err := e.ListNetworkIDs(ctx, marker)
	if err != nil || !slices.Equal(ids, []string{netID}) {
		t.Fatalf("ListNetworkIDs = %v, %v", ids, err)
	}
	res, err := e.InspectNetworkID(ctx, netID)
	if err != nil || res.ID != netID || res.Name != spec.Name || !slices.Equal(res.Containers, []string{member}) || res.Created == "" {
		t.Fatalf("InspectNetworkID = %+v, %v", res, err)
	}
	if _, err := time.Parse(time.RFC3339Nano, res.Created); err != nil {
		t.Fatalf("network Created %q: %v", res.Created, err)
	}
	if out, err := e.RemoveNetworkID(ctx, netID); err == nil || errors.Is(err, docker.ErrNotFound) || out != 0 {
		t.Fatalf("RemoveNetworkID with an endpoint attached = %v, %v; want a refusal", out, err)
	}
	cids, err := e.ListContainerIDs(ctx, marker)
	if err != nil || !slices.Equal(cids, []string{proxyID}) {
		t.Fatalf("ListContainerIDs = %v, %v", cids, err)
	}
	cres, err := e.InspectContainerID(ctx, proxyID)
	if err != nil || cres.ID != proxyID || cres.Name != proxy.Name || cres.Running || cres.Labels["maf-sandbox-test.net"] != name || cres.Containers != nil {
		t.Fatalf("InspectContainerID = %+v, %v", cres, err)
	}
	if _, err := e.InspectContainerID(ctx, "maf-sandbox-docker-000000000000"); !errors.Is(err, docker.ErrInvalid) {
		t.Fatalf("InspectContainerID by name = %v, want ErrInvalid", err)
	}
	if out, err := e.RemoveContainerID(ctx, proxyID); err != nil || out != docker.Removed {
		t.Fatalf("RemoveContainerID = %v, %v", out, err)
	}
	if _, err := e.InspectContainerID(ctx, proxyID); !errors.Is(err, docker.ErrNotFound) {
		t.Fatalf("InspectContainerID after removal = %v", err)
	}
	if out, err := e.RemoveContainerID(ctx, member); err != nil || out != docker.Removed {
		t.Fatalf("RemoveContainerID of the member = %v, %v", out, err)
	}
	if out, err := e.RemoveNetworkID(ctx, netID); err != nil || out != docker.Removed {
		t.Fatalf("RemoveNetworkID = %v, %v", out, err)
	}
	if out, err := e.NetworkRemove(ctx, netID); err != nil || out != docker.Absent {
		t.Fatalf("NetworkRemove of a removed network = %v, %v", out, err)
	}
	id, err := e.EngineID(ctx)
	if err != nil || id == "" {
		t.Fatalf("EngineID = %q, %v", id, err)
	}
}

// TestProxyLogsKeepStdout holds the engine to what the egress drain reads: the proxy's stdout,
// where its decisions are, each line after the daemon's timestamp, within the tail and the
// byte bound, and never its stderr.
func TestProxyLogsKeepStdout(t *testing.T) {
	busybox := dockertest.Busybox(t)
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	image := "maf-sandbox-test/proxy-logs:" + hex.EncodeToString(suffix)
	dir := t.TempDir()
	// The stderr line comes first and well before the rest: the daemon logs the two streams
	// from two pipes, and --tail counts the lines of both.
	dockerfile := "FROM " + busybox + "\nCMD [\"sh\", \"-c\", \"echo decision >&2; sleep 1; echo first; echo second; echo third\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _, _ = dockertest.DockerErr(c, "image", "rm", "--force", image)
	})
	dockertest.Docker(t, "build", "--quiet", "--label", "maf-sandbox.test-image=proxy-logs", "-t", image, dir)
	e := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "maf-sandbox-test-logs-" + hex.EncodeToString(suffix)
	spec := docker.NetworkSpec{Name: name + "-net"}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = e.Remove(c, name+"-proxy")
		_, _ = e.NetworkRemove(c, spec.Name)
	})
	if _, err := e.NetworkCreate(ctx, spec); err != nil {
		t.Fatalf("NetworkCreate = %v", err)
	}
	id, err := e.ProxyCreate(ctx, docker.ProxySpec{Name: name + "-proxy", Image: image, Network: spec.Name})
	if err != nil {
		t.Fatalf("ProxyCreate = %v", err)
	}
	if err := e.ProxyStart(ctx, id); err != nil {
		t.Fatalf("ProxyStart = %v", err)
	}
	waitExited(t, e, id)
	cases := []struct {
		name           string
		tail, maxBytes int
		want           string
	}{
		{"whole", 10, 1024, "first\nsecond\nthird\n"},
		{"tail", 2, 1024, "second\nthird\n"},
	}
	for _, tc := range cases {
		got, err := e.ProxyLogs(ctx, id, tc.tail, tc.maxBytes)
		if err != nil || untimed(t, got) != tc.want {
			t.Fatalf("%s: ProxyLogs = %q, %v; want %q after the timestamps", tc.name, got, err, tc.want)
		}
	}
	if got, err := e.ProxyLogs(ctx, id, 10, 4); err != nil || len(got) > 5 {
		t.Fatalf("bounded ProxyLogs = %q, %v; want at most the bound and one byte", got, err)
	}
}

// untimed is the log b with each line's leading timestamp taken off, which must be one.
func untimed(t *testing.T, b []byte) string {
	t.Helper()
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		ts, text, ok := strings.Cut(line, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); !ok || err != nil {
			t.Fatalf("log line %q does not start with a timestamp", line)
		}
		out.WriteString(text)
	}
	return out.String()
}

// waitExited polls until the container id has stopped by itself.
func waitExited(t *testing.T, e docker.Containers, id string) {
	t.Helper()
	for range 200 {
		info, err := e.Inspect(context.Background(), id)
		if err != nil {
			t.Fatalf("Inspect = %v", err)
		}
		if !info.Running {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("container %s did not exit", id)
}
