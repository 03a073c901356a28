package actors

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// netFake is the actor fake engine plus the network seam: networks with IPAM entries and
// endpoints, container attachments, and proxy logs. Hooks inject the failures of §1.3–§3.4.
type netFake struct {
	*fakeEngine
	nmu      sync.Mutex
	networks map[string]*fakeNet // by name
	attached map[string][]string // container name → network names
	logs     map[string]string   // proxy ID → stdout
	nextID   int

	gateway      string               // the IPAM gateway new networks get ("" = isolated effect)
	createErr    error                // NetworkCreate's answer
	overlaps     int                  // the first overlaps creates are refused as overlapping subnets
	sealBreach   string               // a proxy asked to prove the seal reports this breach
	created      []docker.NetworkSpec // every create asked for, refused or not
	proxyEnv     [][]string           // every proxy's environment
	connectErr   error
	removeProxy  func(id string) (docker.RemoveOutcome, error) // Remove of a proxy ID
	extraOnNet   string                                        // a foreign endpoint on N-net
	workloadNets []string                                      // extra networks of the workload
	noOutbound   bool                                          // the proxy loses its outbound leg
	beforeCreate func()                                        // runs inside NetworkCreate (a racing replica)
	silentPolls  int                                           // readiness polls answered with an empty log
	readyPolls   int                                           // readiness polls made
}

type fakeNet struct {
	id, name string
	gateway  string
	options  map[string]string
}

func newNetFake() *netFake {
	return &netFake{fakeEngine: newFakeEngine(), networks: map[string]*fakeNet{}, attached: map[string][]string{}, logs: map[string]string{}}
}

var _ docker.Networks = (*netFake)(nil)

func (f *netFake) id() string {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.nextID++
	return fmt.Sprintf("%012x%052d", 0xabc000+f.nextID, f.nextID)
}

func (f *netFake) NetworkCreate(_ context.Context, spec docker.NetworkSpec) (string, error) {
	f.log("network create %s", spec.Name)
	f.nmu.Lock()
	f.created = append(f.created, spec)
	overlap := len(f.created) <= f.overlaps
	f.nmu.Unlock()
	if overlap {
		return "", fmt.Errorf("network create: %w", docker.ErrSubnetOverlap)
	}
	if f.createErr != nil {
		return "", f.createErr
	}
	if f.beforeCreate != nil {
		f.beforeCreate()
	}
	f.nmu.Lock()
	_, exists := f.networks[spec.Name]
	f.nmu.Unlock()
	if exists {
		return "", fmt.Errorf("network create: %w", docker.ErrNetworkExists)
	}
	id := f.id()
	f.nmu.Lock()
	defer f.nmu.Unlock()
	opts := map[string]string{docker.OptGatewayModeIPv4: "isolated", docker.OptGatewayModeIPv6: "isolated"}
	if spec.Topology == docker.TopologyInhibitIPv4 {
		opts = map[string]string{docker.OptInhibitIPv4: "true"}
	}
	f.networks[spec.Name] = &fakeNet{id: id, name: spec.Name, gateway: f.gateway, options: opts}
	return id, nil
}

func (f *netFake) findNet(ref string) *fakeNet {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	for _, n := range f.networks {
		if n.name == ref || n.id == ref {
			return n
		}
	}
	return nil
}

func (f *netFake) NetworkInspect(_ context.Context, ref string) (docker.NetworkInfo, error) {
	f.log("network inspect %s", short(ref))
	n := f.findNet(ref)
	if n == nil {
		return docker.NetworkInfo{}, fmt.Errorf("network inspect %s: %w", ref, docker.ErrNotFound)
	}
	info := docker.NetworkInfo{ID: n.id, Name: n.name, Driver: "bridge", Internal: true, Options: n.options,
		IPAM: []docker.IPAMConfig{{Subnet: "172.30.0.0/16", Gateway: n.gateway}}, Containers: map[string]string{}}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	for ctr, nets := range f.attached {
		if slices.Contains(nets, n.name) {
			info.Containers["id-"+ctr] = ctr
		}
	}
	if f.extraOnNet != "" {
		info.Containers["id-x"] = f.extraOnNet
	}
	return info, nil
}

func (f *netFake) NetworkConnect(_ context.Context, network, container string) error {
	f.log("network connect %s %s", network, short(container))
	if f.connectErr != nil {
		return f.connectErr
	}
	c := f.find(container)
	if c == nil {
		return docker.ErrNotFound
	}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.attached[c.name] = append(f.attached[c.name], network)
	return nil
}

func (f *netFake) NetworkRemove(_ context.Context, id string) (docker.RemoveOutcome, error) {
	f.log("network rm %s", short(id))
	n := f.findNet(id)
	if n == nil {
		return docker.Absent, nil
	}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	for ctr, nets := range f.attached {
		if slices.Contains(nets, n.name) {
			return 0, fmt.Errorf("network %s has active endpoints (%s)", n.name, ctr)
		}
	}
	delete(f.networks, n.name)
	return docker.Removed, nil
}

func (f *netFake) ProxyCreate(ctx context.Context, spec docker.ProxySpec) (string, error) {
	_, err := f.fakeEngine.Create(ctx, docker.NewCreateSpec(spec.Name, spec.Image, docker.WithLabels(spec.Labels...)))
	if err != nil {
		return "", err
	}
	id := f.reID(spec.Name)
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.attached[spec.Name] = []string{spec.Network}
	f.proxyEnv = append(f.proxyEnv, slices.Clone(spec.Env))
	const ts = "2026-01-01T00:00:00.000000000Z "
	prove := slices.ContainsFunc(spec.Env, func(e string) bool { return strings.HasPrefix(e, "MAF_SANDBOX_SEAL_TARGETS=") })
	switch {
	case prove && f.sealBreach != "":
		f.logs[id] = ts + egresslog.FormatBreach(f.sealBreach)
	case prove:
		f.logs[id] = ts + egresslog.FormatSealed(12) + ts + "maf-egress-proxy listening on :3128\n"
	default:
		f.logs[id] = ts + "maf-egress-proxy listening on :3128\n"
	}
	return id, nil
}

func (f *netFake) ProxyStart(ctx context.Context, id string) error {
	return f.fakeEngine.Start(ctx, id)
}

func (f *netFake) ProxyStop(_ context.Context, id string, _ time.Duration) error {
	f.log("stop %s", id)
	if f.find(id) == nil {
		return docker.ErrNotFound
	}
	return nil
}

func (f *netFake) ProxyLogs(_ context.Context, id string, tail, _ int) ([]byte, error) {
	if tail > readinessTail {
		f.log("logs %s", id)
	}
	if f.find(id) == nil {
		return nil, docker.ErrNotFound
	}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	if tail <= readinessTail {
		if f.readyPolls++; f.readyPolls <= f.silentPolls {
			return nil, nil
		}
	}
	return []byte(f.logs[id]), nil
}

// reID gives a container a unique ID: the embedded fake numbers by count, which repeats
// once a container is removed.
func (f *netFake) reID(name string) string {
	id := f.id()
	c := f.find(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	c.id = id
	return id
}

// decide appends a decision line to the live proxy of workload n.
func (f *netFake) decide(n, line string) {
	c := f.find(docker.ProxyName(n))
	f.nmu.Lock()
	defer f.nmu.Unlock()
	f.logs[c.id] += "2026-01-01T00:00:01.000000000Z " + line + "\n"
}

func (f *netFake) Create(ctx context.Context, spec docker.CreateSpec) (string, error) {
	id, err := f.fakeEngine.Create(ctx, spec)
	if err == nil {
		id = f.reID(spec.Name)
	}
	if err == nil && spec.Network != "none" {
		f.nmu.Lock()
		f.attached[spec.Name] = append([]string{spec.Network}, f.workloadNets...)
		f.nmu.Unlock()
	}
	return id, err
}

func (f *netFake) Inspect(ctx context.Context, target string) (docker.ContainerInfo, error) {
	info, err := f.fakeEngine.Inspect(ctx, target)
	if err != nil {
		return info, err
	}
	f.nmu.Lock()
	defer f.nmu.Unlock()
	info.Networks = map[string]string{}
	for _, n := range f.attached[info.Name] {
		if f.noOutbound && n == docker.DefaultOutboundNetwork {
			continue
		}
		id := "nid"
		if fn, ok := f.networks[n]; ok {
			id = fn.id
		}
		info.Networks[n] = id
	}
	return info, nil
}

func (f *netFake) Remove(ctx context.Context, target string) (docker.RemoveOutcome, error) {
	c := f.find(target)
	if c != nil && c.labels[label.Role] == label.RoleProxy && f.removeProxy != nil {
		f.log("rm %s", target)
		return f.removeProxy(target)
	}
	out, err := f.fakeEngine.Remove(ctx, target)
	if c != nil && err == nil {
		f.nmu.Lock()
		delete(f.attached, c.name)
		f.nmu.Unlock()
	}
	return out, err
}

// sink records what it is handed, and when.
type sink struct {
	sandbox.NopObserver
	mu      sync.Mutex
	windows []sandbox.EgressWindow
	f       *netFake
	at      []int // len(f.Calls()) at each window
}

func (s *sink) EgressObserved(_ context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
	if s.f != nil {
		s.at = append(s.at, len(s.f.Calls()))
	}
}

func (s *sink) got() []sandbox.EgressWindow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.windows)
}

func egressBackend(t *testing.T, f docker.Driver, opts ...Option) *Backend {
	t.Helper()
	b, err := NewBackend(docker.Config{EgressProxyImage: "proxy:local"}, append([]Option{WithEngine(f), WithoutEventWatch()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func allowSpec(t *testing.T, hosts ...string) sandbox.Spec {
	t.Helper()
	rules := make([]sandbox.EgressRule, len(hosts))
	for i, h := range hosts {
		rules[i] = sandbox.EgressRule{Host: h}
	}
	return testSpec(t, sandbox.WithAllowlist(rules...))
}

func hasCall(calls []string, prefix string) bool {
	return slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, prefix) })
}

func workloadName(b *Backend, spec sandbox.Spec) string {
	return docker.ContainerName(testKey, spec.Kind, egressIDFor(b.cfg, spec))
}

func TestEgressFloorRefusalBeforeAnyWorkload(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name      string
		gateway   string
		createErr error
		removed   bool
	}{
		{"a daemon of 28 that echoes the options but keeps a gateway", "172.30.0.1", nil, true},
		{"engine 27 rejects the option", "", &docker.CommandError{Args: []string{"network", "create"}, ExitCode: 1,
			Stderr: []byte(`invalid gateway mode "isolated" for com.docker.network.bridge.gateway_mode_ipv4`), Class: docker.ErrGatewayModeRejected}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newNetFake()
			f.gateway, f.createErr = tc.gateway, tc.createErr
			b := egressBackend(t, f)
			spec := allowSpec(t, "allowed.example")
			_, err := b.Acquire(context.Background(), testKey, spec)
			if !errors.Is(err, ErrEgressTopologyUnavailable) || !errors.Is(err, sandbox.ErrUnsupported) {
				t.Fatalf("err = %v, want the floor refusal", err)
			}
			for _, want := range []string{"isolated gateway modes", "28.0.0", "inhibit_ipv4", "'closed' or an empty allowlist"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("message %q does not name %q", err, want)
				}
			}
			calls := f.Calls()
			n := workloadName(b, spec)
			if hasCall(calls, "create "+n) || hasCall(calls, "create "+docker.ProxyName(n)) {
				t.Fatalf("something was created before the refusal: %v", calls)
			}
			if got := hasCall(calls, "network rm"); got != tc.removed {
				t.Fatalf("network removed = %v, want %v: %v", got, tc.removed, calls)
			}
			if tc.removed && !strings.Contains(err.Error(), "the network was removed") {
				t.Fatalf("message %q does not say the network was removed", err)
			}
			if len(f.networks) != 0 || len(f.containers) != 0 {
				t.Fatalf("left behind: %v %v", f.networks, f.containers)
			}
		})
	}
}

func TestEgressClosedAndEmptyAllowlistBuildNoNetwork(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	for _, spec := range []sandbox.Spec{testSpec(t), allowSpec(t)} {
		f := newNetFake()
		f.gateway = "172.30.0.1" // would be refused if a network were built
		b := egressBackend(t, f)
		if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
			t.Fatalf("acquire %v: %v", spec.Egress, err)
		}
		if calls := f.Calls(); hasCall(calls, "network") || hasCall(calls, "version") {
			t.Fatalf("closed/empty built a network or read the version: %v", calls)
		}
	}
}

// TestEgressAllowlistEntriesValidated: NewSpec refuses a bad entry, and so does the backend
// at acquire when one was put into a built spec afterwards, before anything reaches the engine.
func TestEgressAllowlistEntriesValidated(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	for _, h := range []string{"a b.example", "a,b.example", "https://a.example", "a\x01.example", strings.Repeat("a", 254), "*", "10.0.0.1", "::1"} {
		f := newNetFake()
		b := egressBackend(t, f)
		spec := allowSpec(t, "ok.example")
		spec.EgressAllow = append(spec.EgressAllow, sandbox.EgressRule{Host: h})
		_, err := b.Acquire(context.Background(), testKey, spec)
		var inv *sandbox.InvalidArgumentError
		if !errors.As(err, &inv) {
			t.Fatalf("entry %q: err = %v, want *sandbox.InvalidArgumentError", h, err)
		}
		if calls := f.Calls(); hasCall(calls, "network") || hasCall(calls, "create") {
			t.Fatalf("entry %q reached the engine: %v", h, calls)
		}
	}
}

func TestEgressAcquireBuildsTopologyAndRecreatesProxy(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	s := &sink{f: f}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "b.example", "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	first := f.find(docker.ProxyName(n))
	if first == nil || f.find(n) == nil {
		t.Fatal("proxy or workload missing after acquire")
	}
	if k, st := egresslog.KeyFromLabels(first.labels); st != egresslog.AttributionLabel || k != testKey {
		t.Fatalf("proxy attribution %v %v", k, st)
	}
	f.decide(n, "ALLOW a.example:443")
	f.decide(n, "DENY evil.example:443")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatalf("warm acquire: %v", err)
	}
	second := f.find(docker.ProxyName(n))
	if second == nil || second.id == first.id {
		t.Fatal("the warm acquire did not recreate the proxy")
	}
	ws := s.got()
	if len(ws) != 1 || ws[0].ProxyID != first.id || ws[0].Key != testKey || len(ws[0].Decisions) != 2 ||
		ws[0].Decisions[1].Decision != sandbox.DecisionDeny || ws[0].Trigger != "acquire" {
		t.Fatalf("windows %+v", ws)
	}
	calls := f.Calls()
	stop, logs, rm := slices.Index(calls, "stop "+first.id), slices.Index(calls, "logs "+first.id), slices.Index(calls, "rm id")
	if stop < 0 || logs < stop || !slices.Contains(calls[logs:], "rm id") || rm < 0 {
		t.Fatalf("drain order by ID: %v", calls)
	}
	if s.at[0] <= logs {
		t.Fatal("published before removal")
	}
}

func TestEgressAdoptionOnlyAfterBridgeCheck(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	for _, tc := range []struct {
		name    string
		gateway string
		ok      bool
	}{{"unaddressed is adopted", "", true}, {"addressed is refused", "172.30.0.1", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNetFake()
			b := egressBackend(t, f)
			spec := allowSpec(t, "a.example")
			n := workloadName(b, spec)
			// Another replica builds N-net between our read and our create.
			f.beforeCreate = func() {
				f.beforeCreate = nil
				f.nmu.Lock()
				defer f.nmu.Unlock()
				f.networks[docker.NetworkName(n)] = &fakeNet{id: fmt.Sprintf("%064d", 7), name: docker.NetworkName(n), gateway: tc.gateway,
					options: map[string]string{docker.OptGatewayModeIPv4: "isolated", docker.OptGatewayModeIPv6: "isolated"}}
			}
			_, err := b.Acquire(context.Background(), testKey, spec)
			if tc.ok && err != nil {
				t.Fatalf("adopt: %v", err)
			}
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "remove it and retry") {
					t.Fatalf("err = %v, want remove-and-retry", err)
				}
				if hasCall(f.Calls(), "create ") {
					t.Fatalf("created on an addressed network: %v", f.Calls())
				}
			}
		})
	}
}

func TestEgressUnusableNetworkDiscardedBeforeReuse(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	b := egressBackend(t, f)
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	old := f.find(n).id
	f.findNet(docker.NetworkName(n)).gateway = "172.30.0.1" // the bridge got an address
	f.gateway = ""
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if c := f.find(n); c == nil || c.id == old {
		t.Fatal("the workload on an addressed bridge was reused")
	}
}

func TestEgressTopologyCheckFailureRemovesWorkload(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name  string
		setup func(*netFake)
		want  string
	}{
		{"a third endpoint on N-net", func(f *netFake) { f.extraOnNet = "intruder" }, "disconnect or remove them"},
		{"the workload on a second network", func(f *netFake) { f.workloadNets = []string{"bridge"} }, "not exactly"},
		{"the proxy without its outbound leg", func(f *netFake) { f.noOutbound = true }, "proxy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newNetFake()
			tc.setup(f)
			b := egressBackend(t, f)
			spec := allowSpec(t, "a.example")
			_, err := b.Acquire(context.Background(), testKey, spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if f.find(workloadName(b, spec)) != nil {
				t.Fatal("the workload was not removed")
			}
		})
	}
}

func TestEgressOutboundConnectFailureCleansColdState(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	f.connectErr = errors.New("network bridge not found")
	b := egressBackend(t, f, WithObserver(&sink{}))
	spec := allowSpec(t, "a.example")
	_, err := b.Acquire(context.Background(), testKey, spec)
	if err == nil || !strings.Contains(err.Error(), "outbound") {
		t.Fatalf("err = %v", err)
	}
	if len(f.containers) != 0 || len(f.networks) != 0 {
		t.Fatalf("cold state left: %v %v (%v)", f.containers, f.networks, f.Calls())
	}
	calls := f.Calls()
	if !(lastIndexPrefix(calls, "rm ") < lastIndexPrefix(calls, "network rm")) {
		t.Fatalf("proxy must go before the network: %v", calls)
	}
}

func lastIndexPrefix(calls []string, p string) int {
	for i := len(calls) - 1; i >= 0; i-- {
		if strings.HasPrefix(calls[i], p) {
			return i
		}
	}
	return -1
}

func TestEgressPublishOnlyAfterRemoval(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	cases := []struct {
		name    string
		remove  func(ctx context.Context, cancel context.CancelFunc) (docker.RemoveOutcome, error)
		publish bool
	}{
		{"removed", func(context.Context, context.CancelFunc) (docker.RemoveOutcome, error) { return docker.Removed, nil }, true},
		{"absent", func(context.Context, context.CancelFunc) (docker.RemoveOutcome, error) { return docker.Absent, nil }, true},
		{"refused", func(context.Context, context.CancelFunc) (docker.RemoveOutcome, error) {
			return 0, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("removal refused")}
		}, false},
		{"timeout", func(context.Context, context.CancelFunc) (docker.RemoveOutcome, error) {
			return 0, &docker.TimeoutError{Args: []string{"rm"}, Timeout: time.Second}
		}, false},
		{"cancelled", func(ctx context.Context, cancel context.CancelFunc) (docker.RemoveOutcome, error) {
			cancel()
			return 0, fmt.Errorf("docker rm: %w", ctx.Err())
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newNetFake()
			s := &sink{}
			b := egressBackend(t, f, WithObserver(s))
			spec := allowSpec(t, "a.example")
			if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
				t.Fatal(err)
			}
			n := workloadName(b, spec)
			proxy := f.find(docker.ProxyName(n))
			f.decide(n, "ALLOW a.example:443")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.removeProxy = func(id string) (docker.RemoveOutcome, error) {
				if id != proxy.id {
					t.Errorf("removed %s, not the inspected ID %s", id, proxy.id)
				}
				return tc.remove(ctx, cancel)
			}
			err := b.drainRemove(ctx, docker.ProxyName(n), "", &testKey, "dispose")
			if got := len(s.got()) == 1; got != tc.publish || (err == nil) != tc.publish {
				t.Fatalf("published = %v, err = %v; want publish %v", got, err, tc.publish)
			}
			if !tc.publish {
				// The proxy survives; a successful retry drains it again and publishes once.
				f.removeProxy = nil
				if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err != nil {
					t.Fatal(err)
				}
				if ws := s.got(); len(ws) != 1 || ws[0].ProxyID != proxy.id || len(ws[0].Decisions) != 1 {
					t.Fatalf("retry windows %+v", ws)
				}
			}
		})
	}
}

// The daemon's version chooses the topology: below 28 inhibit_ipv4, from 28 the isolated
// gateway modes; either way on an explicit subnet of the pool, asked again on a cold acquire.
func TestEgressTopologyByDaemonVersion(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	for _, tc := range []struct {
		version string
		want    docker.Topology
	}{{"20.10.24+dfsg1", docker.TopologyInhibitIPv4}, {"28.2.2", docker.TopologyIsolatedGateway}} {
		t.Run(tc.version, func(t *testing.T) {
			f := newNetFake()
			f.version = tc.version
			b := egressBackend(t, f)
			if _, err := b.Acquire(context.Background(), testKey, allowSpec(t, "a.example")); err != nil {
				t.Fatalf("acquire: %v", err)
			}
			pool, _ := b.subnetPool()
			if len(f.created) != 1 || f.created[0].Topology != tc.want || !pool.Contains(f.created[0].Subnet) {
				t.Fatalf("creates %+v, want one %s network on a subnet of %s", f.created, tc.want, pool.Base())
			}
			if b.topology() != tc.want {
				t.Fatalf("topology = %q", b.topology())
			}
		})
	}
}

// A subnet another network holds is refused by the daemon; the next candidate is tried.
func TestEgressSubnetOverlapMovesOn(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	f.overlaps = 3
	b := egressBackend(t, f)
	if _, err := b.Acquire(context.Background(), testKey, allowSpec(t, "a.example")); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if len(f.created) != 4 {
		t.Fatalf("%d creates, want 4", len(f.created))
	}
	seen := map[string]bool{}
	for _, c := range f.created {
		seen[c.Subnet.String()] = true
	}
	if len(seen) != 4 {
		t.Fatalf("subnets tried %v, want four different ones", f.created)
	}
}

// A pool whose every subnet is taken refuses the acquire with a typed error naming the pool.
func TestEgressSubnetPoolExhausted(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	f.overlaps = 1 << 20
	b, err := NewBackend(docker.Config{EgressProxyImage: "proxy:local", EgressSubnetPool: netip.MustParsePrefix("10.99.0.0/28")},
		WithEngine(f), WithoutEventWatch())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	_, err = b.Acquire(context.Background(), testKey, allowSpec(t, "a.example"))
	var ex *EgressSubnetsExhaustedError
	if !errors.As(err, &ex) || ex.Tried != 2 || !errors.Is(err, ErrEgressTopologyUnavailable) {
		t.Fatalf("err = %v, want exhaustion after the pool's 2 subnets", err)
	}
}

// A new network is proved sealed by its proxy before the outbound leg is connected; a
// breach discards proxy and network and refuses the acquire; a network already proved is
// not probed again.
func TestEgressSealProof(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	b := egressBackend(t, f)
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	calls := f.Calls()
	start := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "start ") })
	connect := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "network connect bridge") })
	if start < 0 || connect < start {
		t.Fatalf("the outbound leg was connected before the proxy proved the seal: %v", calls)
	}
	if proved, broken := b.SealCounts(); proved != 1 || broken != 0 {
		t.Fatalf("seal counts %d/%d", proved, broken)
	}
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatalf("warm acquire: %v", err)
	}
	if len(f.proxyEnv) != 2 || slices.ContainsFunc(f.proxyEnv[1], func(e string) bool { return strings.HasPrefix(e, "MAF_SANDBOX_SEAL_TARGETS=") }) {
		t.Fatalf("the warm acquire's proxy was asked to prove a network already proved: %v", f.proxyEnv)
	}

	f2 := newNetFake()
	f2.sealBreach = "tcp 10.213.0.1:9 answered with a reset"
	b2 := egressBackend(t, f2)
	_, err := b2.Acquire(context.Background(), testKey, spec)
	var se *EgressSealError
	if !errors.As(err, &se) || !errors.Is(err, ErrEgressSealBroken) || !strings.Contains(err.Error(), "answered with a reset") {
		t.Fatalf("err = %v, want the seal refusal naming the breach", err)
	}
	name := workloadName(b2, spec)
	if f2.findNet(docker.NetworkName(name)) != nil || f2.find(docker.ProxyName(name)) != nil || f2.find(name) != nil {
		t.Fatalf("an unsealed network left something behind: %v", f2.Calls())
	}
	if hasCall(f2.Calls(), "network connect") {
		t.Fatalf("the proxy of an unsealed network was connected outbound: %v", f2.Calls())
	}
	if _, broken := b2.SealCounts(); broken != 1 {
		t.Fatal("the broken seal was not counted")
	}
}

// A proxy that is slow to report listening is polled again until it does, within the budget;
// one that never does fails the acquire when the caller's deadline comes first, and the
// half-built proxy is removed.
func TestEgressReadinessPolls(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	f.silentPolls = 3
	b := egressBackend(t, f)
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatalf("acquire with a slow proxy: %v", err)
	}
	if f.readyPolls != 4 {
		t.Fatalf("%d readiness polls, want 4", f.readyPolls)
	}

	f2 := newNetFake()
	f2.silentPolls = 1 << 30
	b2 := egressBackend(t, f2)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := b2.Acquire(ctx, testKey, spec); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire with a silent proxy = %v, want the caller's deadline", err)
	}
	b2.Close(context.Background()) // the caller stopped waiting; the actor finishes its cleanup first
	if p := f2.find(docker.ProxyName(workloadName(b2, spec))); p != nil {
		t.Fatal("the half-built proxy was left")
	}
}

// An allowlisted acquire creates and prepares its workload while the proxy starts and proves
// the seal, but starts it only once the seal verdict is in: no workload process runs on a
// network before its proof.
func TestEgressWorkloadStartsAfterTheSealVerdict(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newTeardownNet()
	b := egressBackend(t, f, WithObserver(&sink{}))
	spec := allowSpec(t, "a.example")
	n := workloadName(b, spec)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onProxyStart = func() { once.Do(func() { close(started); <-release }) }
	acquired := make(chan error, 1)
	go func() {
		_, err := b.Acquire(context.Background(), testKey, spec)
		acquired <- err
	}()
	<-started
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(f.Calls(), "cp-in"); {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("the workload was not prepared while the proxy started: %v", f.Calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for a start that would not wait
	f.mu.Lock()
	c := f.containers[n]
	running := c != nil && c.running
	f.mu.Unlock()
	if c == nil || running {
		close(release)
		t.Fatalf("workload created %v, running %v before the seal verdict", c != nil, running)
	}
	close(release)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	running = f.containers[n].running
	f.mu.Unlock()
	if !running {
		t.Fatal("the workload was not started after the seal verdict")
	}
}

// The workload's fixed address is the last host of the network's IPv4 subnet and the
// proxy's the one after the gateway; a network with no IPv4 subnet, or one too small for
// gateway, proxy and workload, gives neither.
func TestEgressAddresses(t *testing.T) {
	for _, tc := range []struct {
		subnets         []string
		proxy, workload string
	}{
		{[]string{"10.213.0.8/29"}, "10.213.0.10", "10.213.0.14"},
		{[]string{"fd00::/64", "10.213.4.0/24"}, "10.213.4.2", "10.213.4.254"},
		{[]string{"10.213.0.8/30"}, "invalid IP", "invalid IP"},
		{[]string{"fd00::/64"}, "invalid IP", "invalid IP"},
		{nil, "invalid IP", "invalid IP"},
	} {
		var n docker.NetworkInfo
		for _, s := range tc.subnets {
			n.IPAM = append(n.IPAM, docker.IPAMConfig{Subnet: s})
		}
		got := egressAddresses(n)
		if got.proxy.String() != tc.proxy || got.workload.String() != tc.workload {
			t.Errorf("egressAddresses(%v) = proxy %s, workload %s; want %s, %s", tc.subnets, got.proxy, got.workload, tc.proxy, tc.workload)
		}
	}
}

// orderSink records, at each window it is handed, how many proxy removals had returned.
type orderSink struct {
	sandbox.NopObserver
	mu       sync.Mutex
	returned *atomic.Int64
	windows  []sandbox.EgressWindow
	at       []int64
}

func (s *orderSink) EgressObserved(_ context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows = append(s.windows, w)
	s.at = append(s.at, s.returned.Load())
}

// The contract's order (§3.4): drain, remove by the inspected ID, and only once that removal
// returned removed or absent hand the window over. A refused removal hands over nothing; the
// surviving proxy's next drain hands its window over once, after its own removal returned.
func TestEgressWindowHandedOverOnlyAfterTheRemovalReturned(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	var returned atomic.Int64
	s := &orderSink{returned: &returned}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	proxy := f.find(docker.ProxyName(n))
	f.decide(n, "ALLOW a.example:443")
	refuse := true
	f.removeProxy = func(id string) (docker.RemoveOutcome, error) {
		defer returned.Add(1)
		if id != proxy.id {
			t.Errorf("removed %s, not the inspected ID %s", id, proxy.id)
		}
		s.mu.Lock()
		handed := len(s.windows)
		s.mu.Unlock()
		if handed != 0 {
			t.Errorf("a window was handed over before its proxy's removal returned")
		}
		if refuse {
			return 0, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("removal refused")}
		}
		return docker.Removed, nil
	}
	if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err == nil {
		t.Fatal("a refused removal reported success")
	}
	s.mu.Lock()
	handed := len(s.windows)
	s.mu.Unlock()
	if handed != 0 {
		t.Fatalf("a refused removal handed over %d windows", handed)
	}
	refuse = false
	if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	ws, at := slices.Clone(s.windows), slices.Clone(s.at)
	s.mu.Unlock()
	if len(ws) != 1 || ws[0].ProxyID != proxy.id || ws[0].Removal != sandbox.RemovalRemoved || len(ws[0].Decisions) != 1 {
		t.Fatalf("after the retry: %+v, want the proxy's one window, removed", ws)
	}
	if at[0] != 2 {
		t.Fatalf("the window was handed over after %d returned removals, want 2 (the refused one and its own)", at[0])
	}
}

// pendingOrderSink is an orderSink that also takes pending records, noting how many proxy
// removals had returned at each.
type pendingOrderSink struct {
	orderSink
	pending   []sandbox.EgressWindow
	pendingAt []int64
}

func (s *pendingOrderSink) EgressPending(_ context.Context, w sandbox.EgressWindow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, w)
	s.pendingAt = append(s.pendingAt, s.returned.Load())
}

// A PendingEgressSink gets the pending record between the read and the removal, and the
// window itself still only after the removal returned: a refused removal leaves only its
// record, and the retry records again and then hands the window over once.
func TestEgressPendingRecordBeforeRemovalWindowAfter(t *testing.T) {
	defer verifyNoneWithin(t, 3*time.Second)
	f := newNetFake()
	var returned atomic.Int64
	s := &pendingOrderSink{orderSink: orderSink{returned: &returned}}
	b := egressBackend(t, f, WithObserver(s))
	spec := allowSpec(t, "a.example")
	if _, err := b.Acquire(context.Background(), testKey, spec); err != nil {
		t.Fatal(err)
	}
	n := workloadName(b, spec)
	proxy := f.find(docker.ProxyName(n))
	f.decide(n, "ALLOW a.example:443")
	refuse := true
	f.removeProxy = func(string) (docker.RemoveOutcome, error) {
		defer returned.Add(1)
		if refuse {
			return 0, &docker.CommandError{Args: []string{"rm"}, ExitCode: 1, Stderr: []byte("removal refused")}
		}
		return docker.Removed, nil
	}
	if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err == nil {
		t.Fatal("a refused removal reported success")
	}
	refuse = false
	if err := b.drainRemove(context.Background(), docker.ProxyName(n), "", &testKey, "dispose"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) != 2 || s.pendingAt[0] != 0 || s.pendingAt[1] != 1 || s.pending[0].ProxyID != proxy.id || s.pending[0].Removal != "" {
		t.Fatalf("pending records %+v at %v returned removals; want one per drain, each before its removal", s.pending, s.pendingAt)
	}
	if len(s.windows) != 1 || s.at[0] != 2 || s.windows[0].Removal != sandbox.RemovalRemoved {
		t.Fatalf("windows %+v at %v returned removals; want one, after the second removal", s.windows, s.at)
	}
}

// Only an acquire that creates the workload gates it: a workload already on the network (a
// restart, an adoption) is not, and the proxy then takes no fixed address, which that
// workload may hold.
func TestEgressRunGatesOnlyAWorkloadItCreates(t *testing.T) {
	addrs := egressAddresses(docker.NetworkInfo{IPAM: []docker.IPAMConfig{{Subnet: "10.213.0.8/29"}}})
	r, err := newEgressRun(nil, egressLaunch{networkID: "net", addrs: addrs, fresh: true, prove: true, creates: true})
	if err != nil || r.token == "" || r.addrs.proxy != addrs.proxy || r.gateProxy() != "10.213.0.10:3129" {
		t.Fatalf("creating: token %q, proxy %v, %v", r.token, r.addrs.proxy, err)
	}
	r, err = newEgressRun(nil, egressLaunch{networkID: "net", addrs: addrs, prove: true})
	if err != nil || r.token != "" || r.addrs.proxy.IsValid() || r.addrs.workload != addrs.workload {
		t.Fatalf("workload present: token %q, proxy %v, workload %v, %v", r.token, r.addrs.proxy, r.addrs.workload, err)
	}
	r, err = newEgressRun(nil, egressLaunch{networkID: "net", addrs: addrs, creates: true})
	if err != nil || r.token != "" {
		t.Fatalf("network already proved: token %q, %v", r.token, err)
	}
}
