package egress

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/egresstest"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// The offline fixture (egress-and-reap.md §5.4), simplified: one private, internal egress
// network, two static Go HTTPS targets on it under the test's own aliases, and a workload
// image holding the same static program as its client (no curl: "get" prints code=NNN, 000
// when no origin answered).
const (
	// egressSubnet is the range the fixtures' target networks take a free /24 from (several
	// test processes may hold one at once), and the proxies' private-destination allowance:
	// outside the engine's default egress subnet pool.
	egressSubnet = "10.214.0.0/16"
	allowedHost  = "allowed.maf-e2e.example"
	deniedHost   = "denied.maf-e2e.example"
)

type egressFixture struct {
	network string
	caB64   string
	caPEM   []byte            // the targets' CA
	targets map[string]string // alias → address on the egress network
	ids     map[string]string // alias → target container ID (its log lists every request)
}

func newEgressFixture(t testing.TB) *egressFixture {
	t.Helper()
	dockertest.Require(t)
	ctx := itest.Context(t)
	for _, err := range []error{images.EnsureProxy(ctx, "docker", images.ProxyTag), images.EnsureTarget(ctx, "docker"),
		images.EnsureClient(ctx, "docker", dockertest.Busybox(t))} {
		if err != nil {
			t.Fatalf("build images: %v", err)
		}
	}
	caPEM, certPEM, keyPEM := testCA(t, allowedHost, deniedHost)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	f := &egressFixture{network: "maf-e2e-egress-" + hex.EncodeToString(b), caB64: base64.StdEncoding.EncodeToString(caPEM),
		caPEM: caPEM, targets: map[string]string{}, ids: map[string]string{}}
	// Internal as well as private: the proxy's outbound leg reaches the targets and nothing else.
	dockertest.CleanupNetwork(t, f.network)
	pool, err := docker.NewSubnetPool(netip.MustParsePrefix(egressSubnet), 24)
	if err != nil {
		t.Fatal(err)
	}
	created := false
	for subnet := range pool.Candidates(f.network) {
		args := append([]string{"network", "create", "--internal", "--subnet", subnet.String()}, dockertest.LabelArgs()...)
		_, stderr, err := dockertest.DockerErr(ctx, append(args, f.network)...)
		if err == nil {
			created = true
			break
		}
		if !strings.Contains(string(stderr), "overlaps") {
			t.Fatalf("create the fixture network: %v: %s", err, stderr)
		}
	}
	if !created {
		t.Fatalf("no free /24 in %s for the fixture network", egressSubnet)
	}
	for _, alias := range []string{allowedHost, deniedHost} {
		id := dockertest.RunContainer(t, images.TargetTag, "--network", f.network, "--network-alias", alias, "--dns", "127.0.0.1",
			"--user", "0", "-e", "E2E_CERT="+string(certPEM), "-e", "E2E_KEY="+string(keyPEM))
		f.ids[alias] = id
		f.targets[alias] = strings.TrimSpace(dockertest.Docker(t, "inspect", "--format",
			`{{(index .NetworkSettings.Networks "`+f.network+`").IPAddress}}`, id))
	}
	return f
}

func testCA(t testing.TB, names ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caPEM, certPEM, keyPEM, err := images.TargetCertificates(names...)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, certPEM, keyPEM
}

// recordingSink keeps every window it is handed.
type recordingSink struct {
	sandbox.NopObserver
	mu      sync.Mutex
	windows []sandbox.EgressWindow
}

func (s *recordingSink) EgressObserved(_ context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
}

func (s *recordingSink) got() []sandbox.EgressWindow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sandbox.EgressWindow(nil), s.windows...)
}

func egressBackend(t testing.TB, outbound string, opts ...actors.Option) *actors.Backend {
	t.Helper()
	dockertest.Require(t)
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second, EgressProxyImage: images.ProxyTag,
		OutboundNetwork: outbound, EgressPrivateCIDRs: []netip.Prefix{netip.MustParsePrefix(egressSubnet)}}
	opts = append([]actors.Option{actors.WithLogger(zaptest.NewLogger(t))}, opts...)
	b, err := actors.Create(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func allowlistSpec(t testing.TB, image string, hosts ...string) sandbox.Spec {
	t.Helper()
	rules := make([]sandbox.EgressRule, len(hosts))
	for i, h := range hosts {
		rules[i] = sandbox.EgressRule{Host: h}
	}
	s, err := sandbox.NewSpec("shell", sandbox.WithImage(image), sandbox.WithAllowlist(rules...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leftovers lists containers and networks carrying any of the sandbox's derived names.
func leftovers(t *testing.T, n string) string {
	t.Helper()
	ctrs := dockertest.Docker(t, "ps", "-a", "--filter", "name="+n, "--format", "{{.Names}}")
	nets := dockertest.Docker(t, "network", "ls", "--filter", "name="+n, "--format", "{{.Name}}")
	return strings.TrimSpace(ctrs + nets)
}

// allowedSandbox acquires, on a backend of its own, a sandbox allowed to reach allowedHost
// through fx, and returns it with its container name.
func allowedSandbox(t *testing.T, fx *egressFixture) (sandbox.Sandbox, string) {
	t.Helper()
	b := egressBackend(t, fx.network)
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	return itest.Acquire(t, b, key, spec), docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
}

// The topology this daemon gets, read back from the daemon and the host: an internal bridge
// on a subnet of the pool, with inhibit_ipv4 below 28 (and then no IPv4 address on the host's
// bridge) or the isolated gateway modes from 28; and a workload without NET_RAW and with
// IPv6 disabled in its namespace.
func TestEgressTopologyOnThisDaemon(t *testing.T) {
	fx := newEgressFixture(t)
	sb, n := allowedSandbox(t, fx)
	version, err := dockertest.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	want, err := docker.TopologyFor(version)
	if err != nil {
		t.Fatal(err)
	}
	info := dockertest.Docker(t, "network", "inspect", "--format", "{{.Id}} {{.Internal}} {{range .IPAM.Config}}{{.Subnet}}{{end}} {{json .Options}}", docker.NetworkName(n))
	f := strings.Fields(info)
	if len(f) != 4 || f[1] != "true" {
		t.Fatalf("network %s: %s", docker.NetworkName(n), info)
	}
	pool, _ := docker.NewSubnetPool(netip.MustParsePrefix(docker.DefaultEgressSubnetPool), docker.EgressSubnetBits)
	if sub, err := netip.ParsePrefix(f[2]); err != nil || !pool.Contains(sub) {
		t.Fatalf("subnet %s is not one of the pool's", f[2])
	}
	switch want {
	case docker.TopologyInhibitIPv4:
		if !strings.Contains(f[3], docker.OptInhibitIPv4+`":"true"`) {
			t.Fatalf("options %s lack inhibit_ipv4", f[3])
		}
		bridge := "br-" + f[0][:12]
		if out, err := exec.Command("ip", "-4", "addr", "show", "dev", bridge).CombinedOutput(); err != nil || strings.Contains(string(out), "inet ") {
			t.Fatalf("the host's bridge %s holds an IPv4 address (%v):\n%s", bridge, err, out)
		}
	case docker.TopologyIsolatedGateway:
		if !strings.Contains(f[3], docker.OptGatewayModeIPv4) {
			t.Fatalf("options %s lack the isolated gateway modes", f[3])
		}
	}
	ctx := itest.Context(t)
	res, err := sb.Exec(ctx, sandbox.Shell("cat /proc/sys/net/ipv6/conf/all/disable_ipv6; grep CapEff /proc/self/status"), "/", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(res.StdoutBytes))
	if len(lines) != 3 || lines[0] != "1" {
		t.Fatalf("IPv6 not disabled in the workload: %q", res.StdoutBytes)
	}
	capEff, err := strconv.ParseUint(lines[2], 16, 64)
	if err != nil || capEff&(1<<13) != 0 || capEff&(1<<12) != 0 {
		t.Fatalf("the workload holds NET_RAW or NET_ADMIN: CapEff %s", lines[2])
	}
}

// The egress attacks from a root workload with Docker's default capabilities but
// NET_RAW: raw sockets (ARP for the host's addresses, ICMPv6 echo to all-nodes, a crafted SYN)
// are refused by the kernel; ordinary TCP and UDP to every host address and direct TCP to the
// targets bypassing the proxy get nothing; an unlisted name does not resolve.
func TestEgressAttacksFromARootWorkload(t *testing.T) {
	fx := newEgressFixture(t)
	sb, n := allowedSandbox(t, fx)
	ctx := itest.Context(t)
	run := func(line string) (string, int) {
		t.Helper()
		res, err := sb.Exec(ctx, sandbox.Shell(line), "/", time.Minute)
		if err != nil {
			t.Fatalf("exec %q: %v", line, err)
		}
		return strings.TrimSpace(string(res.StdoutBytes) + string(res.StderrBytes)), res.ExitCode
	}
	if out, _ := run("id -u"); out != "0" {
		t.Fatalf("premise: the workload runs as root, got %q", out)
	}
	subnet := strings.TrimSpace(dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", docker.NetworkName(n)))
	gw := netip.MustParsePrefix(subnet).Addr().Next().String()
	hostAddrs := []string{gw, "172.17.0.1"}
	for _, nw := range []string{"bridge", fx.network} {
		hostAddrs = append(hostAddrs, strings.Fields(dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}", nw))...)
	}
	// Raw sockets: refused, whatever the target.
	for _, line := range []string{"busybox arping -c 1 -w 1 -I eth0 " + gw, "busybox arping -c 1 -w 1 -I eth0 172.17.0.1",
		"busybox ping -c 1 -W 1 " + gw, "busybox ping6 -c 1 -W 1 ff02::1%eth0", "busybox ping6 -c 1 -W 1 fe80::1%eth0"} {
		if out, code := run(line); code == 0 {
			t.Errorf("%s succeeded from the sandbox: %s", line, out)
		} else if !strings.Contains(out, "ermission denied") && !strings.Contains(out, "not permitted") && !strings.Contains(out, "nreachable") &&
			!strings.Contains(out, "ddress") {
			t.Errorf("%s failed for another reason than a refusal: %s", line, out)
		}
	}
	// Ordinary TCP and UDP to every host address, and straight to the targets, all at once
	// (each silent attempt waits out its timeout). The proxy, on the sandbox's own network, is
	// the positive control: it accepts TCP on its port and answers UDP to a closed port with
	// port-unreachable, so a probe that could not see an answer fails here.
	var direct []string
	for _, a := range hostAddrs {
		direct = append(direct, a+":22", a+":53", a+":80", a+":2375")
	}
	direct = append(direct, fx.targets[allowedHost]+":443", fx.targets[deniedHost]+":443")
	slices.Sort(direct)
	direct = slices.Compact(direct) // the default bridge's gateway is listed twice
	proxyTCP, proxyUDP := docker.ProxyName(n)+":3128", docker.ProxyName(n)+":9"
	got := reachProbes(t, run, append(direct, proxyTCP), append(direct, proxyUDP))
	if r := got["tcp "+proxyTCP]; r.code != 0 {
		t.Fatalf("positive control: TCP to the proxy %s failed (%d): %s", proxyTCP, r.code, r.out)
	}
	if r := got["udp "+proxyUDP]; r.code != 0 || !strings.Contains(r.out, "refused") {
		t.Fatalf("positive control: UDP to a closed port of the proxy %s drew no port-unreachable (%d): %s", proxyUDP, r.code, r.out)
	}
	for _, addr := range direct {
		if r := got["tcp "+addr]; r.code == 0 {
			t.Errorf("direct TCP to %s from the sandbox: %s", addr, r.out)
		}
		if r := got["udp "+addr]; r.code == 0 {
			t.Errorf("UDP to %s drew an answer: %s", addr, r.out)
		}
	}
	if out, code := run("maf-e2e resolve " + deniedHost); code == 0 {
		t.Errorf("the sandbox resolved the unlisted %s: %s", deniedHost, out)
	}
	// The positive control: through the proxy the allowed host answers.
	if out, _ := run("maf-e2e get https://" + allowedHost + "/ " + fx.caB64); out != "code=200" {
		t.Fatalf("allowed host through the proxy: %s", out)
	}
}

// probeResult is one reach attempt made from inside a sandbox: its exit status and output.
type probeResult struct {
	code int
	out  string
}

// reachProbes makes, in one exec and all at once, a TCP connection attempt (`maf-e2e dial`,
// 3 s) to each of tcp and a one-datagram UDP exchange (`maf-e2e udp`, 1 s) with each of udp,
// and returns the results keyed "tcp <addr>" and "udp <addr>". Every attempt prints exactly
// one line, a single write, so lines from parallel attempts never interleave.
func reachProbes(t *testing.T, run func(string) (string, int), tcp, udp []string) map[string]probeResult {
	t.Helper()
	var script strings.Builder
	script.WriteString(`probe() { if [ "$1" = tcp ]; then out=$(maf-e2e dial "$2" 2>&1); else ` +
		`out=$(maf-e2e udp "$2" 2>&1); fi; code=$?; ` +
		`echo "$1 $2 $code $(echo $out)"; }; `)
	for _, a := range tcp {
		fmt.Fprintf(&script, "probe tcp %s & ", a)
	}
	for _, a := range udp {
		fmt.Fprintf(&script, "probe udp %s & ", a)
	}
	script.WriteString("wait")
	out, _ := run(script.String())
	got := map[string]probeResult{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) < 3 {
			continue
		}
		code, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("probe line %q", line)
		}
		r := probeResult{code: code}
		if len(f) == 4 {
			r.out = f[3]
		}
		got[f[0]+" "+f[1]] = r
	}
	if len(got) != len(tcp)+len(udp) {
		t.Fatalf("%d probe results for %d attempts:\n%s", len(got), len(tcp)+len(udp), out)
	}
	return got
}

// A network whose seal fails — the test gives the host an address on the new bridge, as a
// misconfigured host could — is discarded and the acquire refused, before any workload or
// outbound leg exists.
func TestEgressSealBreachDiscardsTheNetwork(t *testing.T) {
	fx := newEgressFixture(t)
	var bridged []string
	hook := actors.WithEgressNetworkHook(func(ctx context.Context, id string) error {
		addr, err := egresstest.GiveBridgeAHostAddress(ctx, id)
		bridged = append(bridged, addr)
		return err
	})
	b := egressBackend(t, fx.network, hook)
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	t.Cleanup(func() { b.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	_, err := b.Acquire(itest.Context(t), key, spec)
	var se *actors.EgressSealError
	if !errors.As(err, &se) || !errors.Is(err, actors.ErrEgressSealBroken) {
		t.Fatalf("acquire on a bridge the host holds an address on (%v): %v, want the seal refusal", bridged, err)
	}
	if !strings.Contains(se.Breach, bridged[0]) || !strings.Contains(err.Error(), "the network was removed") {
		t.Fatalf("the refusal does not name the host address %s or the cleanup: %v", bridged[0], err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
	if proved, broken := b.SealCounts(); proved != 0 || broken != 1 {
		t.Fatalf("seal counts %d proved, %d broken", proved, broken)
	}
}

func TestEgressClosedAndEmptyAllowlistBuildNoNetwork(t *testing.T) {
	b := egressBackend(t, "")
	for _, spec := range []sandbox.Spec{itest.BusyboxSpec(t), allowlistSpec(t, dockertest.Busybox(t))} {
		key := itest.NewKey(t)
		itest.Acquire(t, b, key, spec)
		n := docker.ContainerName(key, spec.Kind, "")
		if nets := strings.TrimSpace(dockertest.Docker(t, "network", "ls", "--filter", "name="+n, "--format", "{{.Name}}")); nets != "" {
			t.Fatalf("a %s sandbox built %s", spec.Egress, nets)
		}
	}
}

func TestEgressAllowlist(t *testing.T) {
	fx := newEgressFixture(t)
	sink := &recordingSink{}
	b := egressBackend(t, fx.network, actors.WithObserver(sink))
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	ctx := itest.Context(t)
	sb := itest.Acquire(t, b, key, spec)
	run := func(argv ...string) (string, int) {
		t.Helper()
		res, err := sb.Exec(ctx, sandbox.Argv(argv...), "/", time.Minute)
		if err != nil {
			t.Fatalf("exec %v: %v", argv, err)
		}
		return strings.TrimSpace(string(res.StdoutBytes)), res.ExitCode
	}
	if out, _ := run("maf-e2e", "get", "https://"+allowedHost+"/", fx.caB64); out != "code=200" {
		t.Fatalf("allowed host: %s", out)
	}
	if out, _ := run("maf-e2e", "get", "https://"+deniedHost+"/", fx.caB64); !strings.HasPrefix(out, "code=000") || !strings.Contains(out, "Forbidden") {
		t.Fatalf("denied host: %s, want code=000 from the proxy's 403", out)
	}
	// The gate released the image's command with no capability, and allowed egress worked so.
	itest.NoCapabilities(t, sb)
	netInfo := dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}", docker.NetworkName(n))
	direct := []string{fx.targets[allowedHost] + ":443", fx.targets[deniedHost] + ":443", "172.17.0.1:22"}
	for _, gw := range strings.Fields(netInfo) {
		direct = append(direct, gw+":53")
	}
	shell := func(line string) (string, int) { return run("sh", "-c", line) }
	proxyTCP := docker.ProxyName(n) + ":3128" // the positive control: a dial that must connect
	got := reachProbes(t, shell, append(direct, proxyTCP), nil)
	if r := got["tcp "+proxyTCP]; r.code != 0 {
		t.Fatalf("positive control: TCP to the proxy %s failed (%d): %s", proxyTCP, r.code, r.out)
	}
	for _, addr := range direct {
		if r := got["tcp "+addr]; r.code == 0 {
			t.Errorf("direct connection to %s from the sandbox: %s", addr, r.out)
		}
	}
	for _, name := range []string{allowedHost, deniedHost} {
		if out, code := run("maf-e2e", "resolve", name); code == 0 {
			t.Errorf("the sandbox resolved %s: %s", name, out)
		}
	}
	if out, code := run("maf-e2e", "resolve", docker.ProxyName(n)); code != 0 {
		t.Errorf("the sandbox could not resolve its proxy: %s", out)
	}
	if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	ws := sink.got()
	if len(ws) != 1 {
		t.Fatalf("windows: %+v, want exactly one", ws)
	}
	w := ws[0]
	if w.Key != key || len(w.Decisions) != 2 || w.Decisions[0].Decision != sandbox.DecisionAllow || w.Decisions[0].Host != allowedHost ||
		w.Decisions[1].Decision != sandbox.DecisionDeny || w.Decisions[1].Host != deniedHost || w.PrivateCIDRs != egressSubnet {
		t.Fatalf("window %+v", w)
	}
	if err := b.AwaitTeardowns(ctx); err != nil { // the network goes after the reply
		t.Fatal(err)
	}
	if left := leftovers(t, n); left != "" {
		t.Fatalf("left behind: %s", left)
	}
}

// An allowlisted sandbox whose engine died and whose containers went leaves its pool network
// behind; the reaper removes it by age like any labelled network, and its /29 is free again.
func TestReapRemovesAnOrphanedPoolNetwork(t *testing.T) {
	fx := newEgressFixture(t)
	key := itest.NewKey(t)
	spec := allowlistSpec(t, images.ClientTag, allowedHost)
	itest.Acquire(t, egressBackend(t, fx.network), key, spec)
	n := docker.ContainerName(key, spec.Kind, docker.EgressID(images.ProxyTag, []string{allowedHost}))
	net := docker.NetworkName(n)
	subnet := strings.TrimSpace(dockertest.Docker(t, "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", net))
	// The engine is gone and so are its containers; the network is the orphan.
	dockertest.Docker(t, "rm", "--force", n, docker.ProxyName(n))
	time.Sleep(1100 * time.Millisecond)
	b := itest.NewBackend(t)
	ctx := itest.Context(t)
	got, err := b.Reap(ctx, time.Second, reaper.WithScope(key.Scope))
	if err != nil {
		t.Fatal(err)
	}
	if got.NetworksRemoved < 1 || strings.TrimSpace(dockertest.Docker(t, "network", "ls", "--quiet", "--filter", "name="+net)) != "" {
		t.Fatalf("reap %+v left the orphaned pool network %s", got, net)
	}
	// Its subnet is given back: a network can be made on it again.
	reuse := "maf-e2e-reuse-" + randomHex(t)
	newTestNetwork(t, reuse, "--internal", "--subnet", subnet)
}
