package images_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// Names the test gives its targets: aliases on its private network, resolved by the proxy
// through the engine's embedded DNS.
const (
	allowedHost = "allowed.maf-e2e.example" // busybox httpd on 443
	deniedHost  = "denied.maf-e2e.example"  // the same server, not on the allowlist
	downHost    = "down.maf-e2e.example"    // the client container: nothing listens on 443
)

// No case asks for a name the network does not know: the engine's embedded DNS would forward
// that query to the host's resolvers, off the private network. As a safeguard every container
// here names its own loopback as the upstream server (--dns 127.0.0.1), so a stray query
// fails inside the container instead. A failed resolution is covered in-process, against a
// stub resolver.

// noUpstreamDNS keeps the embedded DNS from forwarding anywhere outside the container.
var noUpstreamDNS = []string{"--dns", "127.0.0.1"}

// TestProxyImage builds the egress proxy image from this source and runs it, hardened as the
// engine runs it, on an --internal network of its own, with a target and a client container
// beside it. All traffic stays on that private network.
func TestProxyImage(t *testing.T) {
	busybox := dockertest.Busybox(t)
	name := func(s string) string { return "maf-proxytest-" + dockertest.Process() + "-" + s }
	tag := "maf-sandbox/egress-proxy:test-" + dockertest.Process()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := dockertest.DockerErr(ctx, "image", "rm", "--force", tag); err != nil {
			t.Errorf("remove image: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := images.BuildProxy(ctx, "docker", tag); err != nil {
		t.Fatalf("BuildProxy: %v", err)
	}
	t.Logf("BuildProxy took %v", time.Since(start).Round(time.Millisecond))
	built := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", tag)
	start = time.Now()
	if err := images.EnsureProxy(ctx, "docker", tag); err != nil {
		t.Fatalf("EnsureProxy: %v", err)
	}
	t.Logf("EnsureProxy of a current image took %v", time.Since(start).Round(time.Millisecond))
	if got := dockertest.Docker(t, "image", "inspect", "--format", "{{.Id}}", tag); got != built {
		t.Fatalf("EnsureProxy rebuilt a current image: %s, was %s", got, built)
	}

	t.Run("image config", func(t *testing.T) {
		got := dockertest.Docker(t, "image", "inspect", "--format",
			`{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{json .Config.ExposedPorts}}|{{index .Config.Labels "`+images.LabelImage+`"}}|{{len .RootFS.Layers}}`, tag)
		want := `65532:65532|["/maf-egress-proxy","proxy"]|null|{"3128/tcp":{}}|proxy|1`
		if got != want {
			t.Fatalf("image config %s, want %s", got, want)
		}
		size, err := strconv.Atoi(dockertest.Docker(t, "image", "inspect", "--format", "{{.Size}}", tag))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("image size %.1f MiB", float64(size)/(1<<20))
	})

	// The private network. Its removal is registered before it is created, and before any
	// container, so it runs last.
	network := name("net")
	dockertest.CleanupNetwork(t, network)
	dockertest.Docker(t, append(append([]string{"network", "create", "--internal"}, dockertest.LabelArgs()...), network)...)
	subnet, err := netip.ParsePrefix(dockertest.Docker(t, "network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", network))
	if err != nil {
		t.Fatalf("network subnet: %v", err)
	}
	if !subnet.Addr().IsPrivate() {
		t.Fatalf("network subnet %s is not private", subnet)
	}

	target := dockertest.RunContainer(t, busybox, append(noUpstreamDNS, "--network", network,
		"--network-alias", allowedHost, "--network-alias", deniedHost)...)
	dockertest.Docker(t, "exec", "--detach", target, "sh", "-c",
		"mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec /bin/busybox httpd -f -p 443 -h /tmp/www")
	client := dockertest.RunContainer(t, busybox, append(noUpstreamDNS, "--network", network, "--network-alias", downHost)...)

	allow := strings.Join([]string{allowedHost, downHost}, ",")
	proxy := runProxy(t, tag, name("proxy"), network, "egress-proxy",
		"MAF_SANDBOX_ALLOW="+allow, "MAF_SANDBOX_PRIVATE_CIDRS="+subnet.String())
	bare := runProxy(t, tag, name("bare"), network, "egress-proxy-bare", "MAF_SANDBOX_ALLOW="+allow)
	for _, id := range []string{proxy, bare} {
		waitListening(t, id)
	}
	if logs := dockertest.Docker(t, "logs", proxy); logs != "listening on 3128; allowing: "+allowedHost+", "+downHost {
		t.Fatalf("readiness line %q", logs)
	}

	const forbidden = "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n"
	const badGateway = "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n"
	cases := []struct {
		name, proxy, target string
		wantPrefix, want    string
	}{
		{name: "allowed tunnel with pipelined request", proxy: "egress-proxy", target: allowedHost + ":443",
			wantPrefix: "HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK\r\n"},
		{name: "denied host", proxy: "egress-proxy", target: deniedHost + ":443", want: forbidden},
		{name: "allowed host on another port", proxy: "egress-proxy", target: allowedHost + ":80", want: forbidden},
		{name: "allowed, nothing listening", proxy: "egress-proxy", target: downHost + ":443", want: badGateway},
		{name: "private target without the allowance", proxy: "egress-proxy-bare", target: allowedHost + ":443", want: forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := connectVia(t, client, tc.proxy, tc.target)
			switch {
			case tc.wantPrefix != "" && !strings.HasPrefix(got, tc.wantPrefix):
				t.Fatalf("answer %q, want it to start %q", got, tc.wantPrefix)
			case tc.wantPrefix != "" && !strings.HasSuffix(got, "\r\n\r\nok\n"):
				t.Fatalf("answer %q lacks the target's body", got)
			case tc.wantPrefix == "" && got != tc.want:
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("plain HTTP is refused 405", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, stderr, err := dockertest.DockerErr(ctx, "exec", "-e", "http_proxy=http://egress-proxy:3128", client,
			"wget", "-q", "-O", "-", "http://"+allowedHost+"/")
		if err == nil || !strings.Contains(string(stderr), "405") {
			t.Fatalf("wget through the proxy: %v, stderr %q", err, stderr)
		}
	})

	t.Run("stop is prompt and clean", func(t *testing.T) {
		start := time.Now()
		dockertest.Docker(t, "stop", "--time", "10", proxy)
		elapsed := time.Since(start)
		t.Logf("docker stop took %v", elapsed.Round(time.Millisecond))
		if elapsed > 3*time.Second {
			t.Fatalf("docker stop took %v: SIGTERM was not handled", elapsed)
		}
		if code := dockertest.Docker(t, "inspect", "--format", "{{.State.ExitCode}}", proxy); code != "0" {
			t.Fatalf("exit code %s", code)
		}
	})

	t.Run("decision log", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		stdout, stderr, err := dockertest.DockerErr(ctx, "logs", "--timestamps", "--tail", strconv.Itoa(egresslog.TailLines+1), proxy)
		if err != nil {
			t.Fatal(err)
		}
		if len(stderr) != 0 {
			t.Fatalf("proxy wrote to stderr: %q", stderr)
		}
		decisions, tr, err := egresslog.ParseLog(strings.NewReader(string(stdout)), egresslog.WithTimestamps())
		if err != nil || tr.Truncated() {
			t.Fatalf("parse: %+v %v", tr, err)
		}
		want := []sandbox.EgressDecision{
			{Decision: sandbox.DecisionAllow, Host: allowedHost, Port: 443},
			{Decision: sandbox.DecisionDeny, Host: deniedHost, Port: 443},
			{Decision: sandbox.DecisionDeny, Host: allowedHost, Port: 80},
			{Decision: sandbox.DecisionUnreachable, Host: downHost, Port: 443},
		}
		if len(decisions) != len(want) {
			t.Fatalf("decisions %+v, want %+v", decisions, want)
		}
		var last time.Time
		for i, d := range decisions {
			if d.Decision != want[i].Decision || d.Host != want[i].Host || d.Port != want[i].Port {
				t.Fatalf("decision %d: %+v, want %+v", i, d, want[i])
			}
			if d.At.IsZero() || d.At.Before(last) {
				t.Fatalf("decision %d: time %v after %v", i, d.At, last)
			}
			last = d.At
		}

		out := dockertest.Docker(t, "logs", bare)
		if !strings.HasSuffix(out, "\nDENY-NONGLOBAL "+allowedHost+":443") {
			t.Fatalf("proxy without allowance logged %q", out)
		}
	})
}

// runProxy starts the proxy image as the engine does (egress-and-reap.md §1.5: read-only,
// no capabilities, no new privileges, bounded pids, memory and log, never pulled) on network
// under alias, with env, labelled for the sweep. Its removal is registered before the run.
func runProxy(t *testing.T, image, name, network, alias string, env ...string) string {
	t.Helper()
	cidfile := filepath.Join(t.TempDir(), "cid")
	t.Cleanup(func() {
		b, err := os.ReadFile(cidfile)
		if err != nil || len(b) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := dockertest.DockerErr(ctx, "rm", "--force", strings.TrimSpace(string(b))); err != nil {
			t.Errorf("remove proxy: %v", err)
		}
	})
	args := []string{"run", "--detach", "--cidfile", cidfile, "--name", name, "--pull", "never",
		"--network", network, "--network-alias", alias,
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", "64", "--memory", "64m",
		"--log-driver", "json-file", "--log-opt", "max-size=16m", "--log-opt", "max-file=2"}
	args = append(args, noUpstreamDNS...)
	args = append(args, dockertest.LabelArgs()...)
	for _, e := range env {
		args = append(args, "--env", e)
	}
	return dockertest.Docker(t, append(args, image)...)
}

// waitListening polls the proxy's log for the readiness marker, as acquire does: 20 tries,
// 250 ms apart.
func waitListening(t *testing.T, id string) {
	t.Helper()
	for range 20 {
		if strings.Contains(dockertest.Docker(t, "logs", id), egresslog.ReadyMarker) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("proxy %s never reported listening; state %s", id,
		dockertest.Docker(t, "inspect", "--format", "{{json .State}}", id))
}

// connectVia sends, from the client container, a CONNECT for target to proxy with a plain
// HTTP request pipelined behind it in the same write, and returns all the proxy sent back.
func connectVia(t *testing.T, client, proxy, target string) string {
	t.Helper()
	host, _, _ := strings.Cut(target, ":")
	script := fmt.Sprintf(`printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nGET / HTTP/1.0\r\nHost: %s\r\n\r\n' | timeout 20 nc %s 3128`,
		target, target, host, proxy)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stdout, _, err := dockertest.DockerErr(ctx, "exec", client, "sh", "-c", script)
	if err != nil {
		t.Fatalf("connect via %s: %v (got %q)", proxy, err, stdout)
	}
	return string(stdout)
}
