package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// This file is the allowlist topology (egress-and-reap.md §1) and the drain of §3.2–§3.4:
// the per-sandbox internal network N-net, the dual-homed proxy N-proxy recreated on every
// acquire, the four checks before hand-out, and the read of a proxy's decisions by its
// inspected ID before its removal by that same ID. Nothing here runs for a closed sandbox
// or an empty allowlist: those stay on --network none and never read the engine's version.

// floorMessage is what every topology refusal ends with: what an allowlist needs and the
// alternatives.
const floorMessage = "an allowlisted sandbox needs an internal bridge network that leaves the workload no route to the host " +
	"(Docker Engine 28.0.0+: isolated gateway modes; older Linux daemons with the bridge driver: inhibit_ipv4); " +
	"run 'closed' or an empty allowlist, which need no network"

// Drain and readiness bounds (egress-and-reap.md §1.5, §3.2).
const (
	proxyStopGrace = 2 * time.Second
	// Readiness: the spec polls 20 times 250 ms apart, a 5 s budget. The proxy listens within
	// milliseconds of its start, so the polls begin 10 ms apart and double up to 250 ms within
	// the same budget: an allowlisted acquire no longer waits a quarter second for a proxy that
	// was ready at once. A proving proxy is first read when its seal probe's budget is out.
	readinessBudget  = 20 * 250 * time.Millisecond
	readinessFirst   = 10 * time.Millisecond
	readinessLongest = 250 * time.Millisecond
	readinessTail    = 50
	readinessMaxRead = 64 << 10
)

// egressOptions are the allowlist settings of a backend.
type egressOptions struct {
	networkHook func(ctx context.Context, networkID string) error
	upstreamCAs []byte // PEM; none: inspecting proxies verify against the system roots (egress_inspect.go)
}

// WithEgressNetworkHook calls hook with each internal network's ID after the backend created
// it and before its seal is proved. It is the fault-injection seam of the seal tests (which
// give the bridge a host address here); production code passes none.
func WithEgressNetworkHook(hook func(ctx context.Context, networkID string) error) Option {
	return func(o *options) error { o.egress.networkHook = hook; return nil }
}

// egressIDFor is the egress identity Acquire folds into the name ("" for --network none).
func egressIDFor(cfg docker.Config, spec sandbox.Spec) string {
	if spec.Egress != sandbox.EgressAllowlist {
		return ""
	}
	return docker.EgressID(cfg.EgressProxyImage, sandbox.EgressIdentities(spec.EgressAllow))
}

// workloadNetwork is the workload's network option: N-net and the proxy variables for an
// allowlist with hosts, --network none otherwise (§1.6).
func (a *containerActor) workloadNetwork(spec sandbox.Spec) docker.CreateOpt {
	if egressIDFor(a.b.cfg, spec) == "" {
		return docker.WithNetworkNone()
	}
	network := docker.WithNetwork(docker.NetworkName(a.name), docker.ProxyURL(a.name))
	if !inspects(spec) {
		return network
	}
	vars := credentialVars(a.name, spec) // egress_inspect.go
	return func(s *docker.CreateSpec) { network(s); docker.WithTrustFile(trustPath)(s); docker.WithEnv(vars...)(s) }
}

// ensureEgress runs the allowlist steps that come before the workload (docker-backend §15):
// entry validation, the topology (asked again of the daemon on a cold acquire), the unusable-network discard,
// the internal network (created on a free subnet, or adopted after the bridge check), and it launches the proxy recreated for this acquire — which proves the
// seal of a network this actor has not proved yet before its outbound leg is connected — on
// a goroutine the acquire joins (egress_run.go). It returns nil for a sandbox on --network
// none, and info as it stands after a discard (nil when N was removed).
func (a *containerActor) ensureEgress(ctx context.Context, m *acquireRequest, info *docker.ContainerInfo, began time.Time) (*egressRun, *docker.ContainerInfo, error) {
	if m.EgressID == "" {
		return nil, info, nil
	}
	if err := sandbox.CheckEgressRules(m.Spec.EgressAllow); err != nil { // again: a spec's fields are open to change
		return nil, info, err
	}
	nets := a.b.engine
	name := docker.NetworkName(a.name)
	if err := a.b.awaitNetworkRemoval(ctx, name); err != nil { // a disposal's, still under way
		return nil, info, fmt.Errorf("wait for the removal of %s: %w", name, err)
	}
	t := a.b.topology()
	var (
		n    docker.NetworkInfo
		nerr error
	)
	if info == nil || t == "" {
		// The daemon's version and the network's state are independent reads: both at once.
		got := make(chan struct{})
		go func() { defer close(got); n, nerr = nets.NetworkInspect(ctx, name) }()
		var err error
		t, err = a.b.learnTopology(ctx, began)
		<-got
		if err != nil {
			return nil, info, err
		}
	} else {
		n, nerr = nets.NetworkInspect(ctx, name)
	}
	info, err := a.discardUnusable(ctx, nets, m.Key, info, t, n, nerr)
	if err != nil {
		return nil, info, err
	}
	netID, addrs, fresh, err := a.ensureNetwork(ctx, nets, m.Key, m.Spec, t)
	if err != nil {
		return nil, info, err
	}
	if fresh && a.b.egress.networkHook != nil {
		if err := a.b.egress.networkHook(ctx, netID); err != nil {
			a.removeNetwork(nets, netID)
			return nil, info, fmt.Errorf("egress network hook: %w", err)
		}
	}
	run, err := newEgressRun(nets, egressLaunch{networkID: netID, addrs: addrs, fresh: fresh,
		prove: a.provedNetwork != netID, creates: info == nil})
	if err != nil {
		return nil, info, err
	}
	a.egressBuild = run
	go run.build(func(sealed func()) (string, error) {
		return a.recreateProxy(ctx, nets, m.Key, m.Spec, sandbox.EgressHosts(m.Spec.EgressAllow), run, sealed)
	})
	return run, info, nil
}

// bridgeProblem is the bridge check of §1.7 on an inspected network, "" when it passes: a
// bridge, internal, with the options of topology t. For the isolated gateway modes the effect
// is checked too — no IPAM entry of any family carries a Gateway. For inhibit_ipv4 the
// recorded gateway proves nothing either way on a 20.10 daemon (with an explicit subnet it
// shows none even where the host holds .1), so the proof is the seal probe's, not this read.
func bridgeProblem(n docker.NetworkInfo, t docker.Topology) string {
	switch {
	case n.Driver != "bridge":
		return fmt.Sprintf("its driver is %q, not bridge", n.Driver)
	case !n.Internal:
		return "it is not internal"
	}
	if t == docker.TopologyInhibitIPv4 {
		if n.Options[docker.OptInhibitIPv4] != "true" {
			return fmt.Sprintf("option %s reads back %q, not true", docker.OptInhibitIPv4, n.Options[docker.OptInhibitIPv4])
		}
		return ""
	}
	for _, c := range n.IPAM {
		if c.Gateway != "" {
			return fmt.Sprintf("its bridge carries a host address (IPAM gateway %s on %s)", c.Gateway, c.Subnet)
		}
	}
	for _, k := range []string{docker.OptGatewayModeIPv4, docker.OptGatewayModeIPv6} {
		if n.Options[k] != docker.GatewayIsolated {
			return fmt.Sprintf("option %s reads back %q, not isolated", k, n.Options[k])
		}
	}
	return ""
}

// ensureNetwork creates N-net on the first free subnet of the pool, or adopts the existing
// one once its bridge check passes (§1.3). fresh reports a network created by this call. A
// network just created that fails the check is removed and refused; so is a daemon that
// rejects a gateway-mode option.
func (a *containerActor) ensureNetwork(ctx context.Context, nets docker.Networks, key sandbox.Key, spec sandbox.Spec,
	t docker.Topology) (id string, addrs egressAddrs, fresh bool, err error) {
	name := docker.NetworkName(a.name)
	labels, err := label.Sandbox(key, spec.Kind, spec.Labels)
	if err != nil {
		return "", egressAddrs{}, false, fmt.Errorf("label network %s: %w", name, err)
	}
	pool, err := a.b.subnetPool()
	if err != nil {
		return "", egressAddrs{}, false, err
	}
	tried := 0
	for subnet := range pool.Candidates(name) {
		tried++
		id, err := nets.NetworkCreate(ctx, docker.NetworkSpec{Name: name, Labels: labels, Topology: t, Subnet: subnet})
		switch {
		case errors.Is(err, docker.ErrSubnetOverlap):
			continue // another network holds it: the next candidate
		case err == nil:
			return a.checkCreated(ctx, nets, name, id, t)
		case errors.Is(err, docker.ErrGatewayModeRejected):
			return "", egressAddrs{}, false, &EgressTopologyError{Network: name, Reason: "the daemon refused the gateway mode: " + err.Error()}
		case errors.Is(err, docker.ErrNetworkExists):
			id, addr, err := a.adoptNetwork(ctx, nets, name, t)
			return id, addr, false, err
		}
		return "", egressAddrs{}, false, fmt.Errorf("create egress network %s: %w", name, err)
	}
	return "", egressAddrs{}, false, &EgressSubnetsExhaustedError{Network: name, Pool: pool.Base(), Tried: tried}
}

// checkCreated reads a network just created back and removes it when it fails the check.
func (a *containerActor) checkCreated(ctx context.Context, nets docker.Networks, name, id string, t docker.Topology) (string, egressAddrs, bool, error) {
	reason := ""
	n, err := nets.NetworkInspect(ctx, id)
	if err != nil {
		reason = "it could not be read back: " + err.Error()
	} else {
		reason = bridgeProblem(n, t)
	}
	if reason == "" {
		a.log.Info("egress network created", zap.String("network", name), zap.String("topology", string(t)),
			zap.Strings("subnets", n.Subnets()))
		return id, egressAddresses(n), true, nil
	}
	cleanup := "the network was removed"
	if _, rerr := nets.NetworkRemove(context.WithoutCancel(ctx), id); rerr != nil {
		cleanup = fmt.Sprintf("the network could not be removed (%v); remove it by hand", rerr)
	}
	return "", egressAddrs{}, false, &EgressTopologyError{Network: name, Reason: "the daemon built it but " + reason, Cleanup: cleanup}
}

// adoptNetwork takes over an existing N-net once its bridge check passes.
func (a *containerActor) adoptNetwork(ctx context.Context, nets docker.Networks, name string, t docker.Topology) (string, egressAddrs, error) {
	n, err := nets.NetworkInspect(ctx, name)
	if isNotFound(err) {
		return "", egressAddrs{}, fmt.Errorf("egress network %s existed at create and was gone when read; retry, the next acquire creates it", name)
	}
	if err != nil {
		return "", egressAddrs{}, fmt.Errorf("egress network %s exists and could not be read (%w); remove it and retry", name, err)
	}
	if reason := bridgeProblem(n, t); reason != "" {
		return "", egressAddrs{}, fmt.Errorf("egress network %s exists but %s; remove it and retry", name, reason)
	}
	return n.ID, egressAddresses(n), nil
}

// discardUnusable is §15.2: before the reuse decision, an N-net that fails the bridge check,
// or a workload that lost its network (n and err: the network's inspect), is torn down in the §1.9 order so that it is rebuilt
// fresh. It returns what is left of the workload (nil when removed).
func (a *containerActor) discardUnusable(ctx context.Context, nets docker.Networks, key sandbox.Key, info *docker.ContainerInfo, t docker.Topology,
	n docker.NetworkInfo, err error) (*docker.ContainerInfo, error) {
	name := docker.NetworkName(a.name)
	reason := ""
	switch {
	case isNotFound(err) && info == nil:
		return nil, nil
	case isNotFound(err):
		reason = "its network is gone"
	case err != nil:
		return info, fmt.Errorf("inspect egress network %s: %w", name, err)
	default:
		reason = bridgeProblem(n, t)
		if reason == "" && info != nil {
			if _, ok := info.Networks[name]; !ok || len(info.Networks) != 1 {
				reason = fmt.Sprintf("the workload is attached to %v, not to %s alone", slices.Sorted(maps.Keys(info.Networks)), name)
			}
		}
	}
	if reason == "" {
		return info, nil
	}
	a.log.Warn("egress topology unusable; tearing it down to rebuild", zap.String("reason", reason))
	if err := a.b.teardownProxy(ctx, docker.ProxyName(a.name), &key, egresslog.TriggerTopologyRepair); err != nil {
		return info, fmt.Errorf("egress topology of %s is unusable (%s) and its proxy could not be removed: %w", a.name, reason, err)
	}
	if info != nil {
		if _, err := a.b.engine.Remove(ctx, a.name); err != nil {
			return info, fmt.Errorf("egress topology of %s is unusable (%s) and the workload could not be removed: %w", a.name, reason, err)
		}
		a.forget()
	}
	if n.ID != "" {
		if _, err := nets.NetworkRemove(ctx, n.ID); err != nil {
			return nil, fmt.Errorf("egress topology of %s is unusable (%s) and its network could not be removed: %w", a.name, reason, err)
		}
	}
	return nil, nil
}

// proxyLabels are the proxy's labels ([label.Proxy]) and its private allowance, warning when
// the key is over the attribution budget.
func (a *containerActor) proxyLabels(key sandbox.Key, spec sandbox.Spec) ([]label.Label, string, error) {
	cidrs := make([]string, len(a.b.cfg.EgressPrivateCIDRs))
	for i, p := range a.b.cfg.EgressPrivateCIDRs {
		cidrs[i] = p.String()
	}
	private := strings.Join(cidrs, ",")
	labels, attributed, err := label.Proxy(key, spec.Kind, spec.Labels, private)
	if err != nil {
		return nil, "", err
	}
	if !attributed {
		a.log.Warn("the key exceeds the 4096-byte attribution limit; its proxy's windows cannot be attributed by label",
			zap.String("key", key.String()))
	}
	return labels, private, nil
}

// recreateProxy is §1.5: drain and remove any N-proxy, create a fresh one on N-net only,
// start it, wait for it to say it is listening — when prove, after its seal probe said the
// segment reaches nothing of the host, which sealed is told — and only then connect its
// outbound leg. On a failure
// after the create the half-built proxy is drained and removed.
func (a *containerActor) recreateProxy(ctx context.Context, nets docker.Networks, key sandbox.Key, spec sandbox.Spec, hosts []string, run *egressRun,
	sealed func()) (string, error) {
	prove := run.prove
	name := docker.ProxyName(a.name)
	if err := a.b.teardownProxy(ctx, name, &key, egresslog.TriggerAcquire); err != nil {
		return "", fmt.Errorf("remove the previous proxy %s: %w", name, err)
	}
	labels, private, err := a.proxyLabels(key, spec)
	if err != nil {
		return "", fmt.Errorf("label proxy %s: %w", name, err)
	}
	env := []string{egresslog.EnvAllow + "=" + strings.Join(hosts, ",")}
	if private != "" {
		env = append(env, egresslog.EnvPrivateCIDRs+"="+private)
	}
	env = append(env, a.b.inspectEnv(spec)...) // none for a tunnel-only allowlist
	creds, err := a.credentialEnv(spec)        // the secrets: the proxy's environment only, off every command line
	if err != nil {
		return "", err
	}
	if prove {
		env = append(env, egresslog.EnvSealTargets+"="+egresslog.FormatSealTargets(a.b.sealTargets(ctx, nets)))
		if run.addrs.workload.IsValid() { // the workload's own address: it may be up there, gated
			env = append(env, egresslog.EnvSealSkip+"="+run.addrs.workload.String())
		}
		if run.token != "" { // the gate's release, served once sealed
			env = append(env, egresslog.EnvGateListen+"="+run.gateProxy(), egresslog.EnvGateToken+"="+run.token)
		}
	}
	id, err := nets.ProxyCreate(ctx, docker.ProxySpec{Name: name, Image: a.b.cfg.EgressProxyImage,
		Network: docker.NetworkName(a.name), Env: env, SecretEnv: creds, Labels: labels, Sealed: true, IPv4: run.addrs.proxy})
	if errors.Is(err, docker.ErrImageMissing) {
		return "", &sandbox.ImageMissingError{Backend: BackendName, Image: a.b.cfg.EgressProxyImage,
			Hint: "it is the egress proxy's; build it with `engine images build`"}
	}
	if err != nil {
		return "", fmt.Errorf("create proxy %s: %w", name, err)
	}
	fail := func(err error) (string, error) {
		if rerr := a.b.drainRemove(context.WithoutCancel(ctx), id, id, &key, egresslog.TriggerSetupFailure); rerr != nil {
			a.log.Warn("remove half-built proxy", zap.String("container_id", id), zap.Error(rerr))
		}
		return "", err
	}
	if prove {
		run.offerGate(a.b.gateBinary(ctx, id)) // the workload may be created now
	}
	if err := nets.ProxyStart(ctx, id); err != nil {
		return fail(fmt.Errorf("start proxy %s: %w", name, err))
	}
	if !prove {
		out, err := a.awaitProxy(ctx, nets, id, false)
		if err != nil {
			return fail(fmt.Errorf("wait for proxy %s: %w", name, err))
		}
		run.ca = egresslog.ParseCA(string(out))
	} else {
		verdict, detail, out, err := a.awaitSeal(ctx, nets, id)
		run.ca = egresslog.ParseCA(string(out))
		if err != nil {
			return fail(fmt.Errorf("wait for proxy %s: %w", name, err))
		}
		a.b.countSeal(docker.NetworkName(a.name), verdict == egresslog.Sealed, detail)
		if verdict != egresslog.Sealed {
			if verdict == egresslog.SealUnknown {
				detail = "the proxy stopped before its seal probe gave a verdict"
			}
			_, err := fail(nil)
			_ = err
			return "", &EgressSealError{Network: docker.NetworkName(a.name), Breach: detail}
		}
		sealed() // the workload may start now; the outbound leg is connected meanwhile
	}
	outbound := a.b.outboundNetwork()
	if err := nets.NetworkConnect(ctx, outbound, id); err != nil {
		return fail(fmt.Errorf("connect proxy %s to the outbound network %s (without it the allowlist would reach nothing): %w", name, outbound, err))
	}
	return id, nil
}

// awaitSeal waits for a proving proxy's seal line (awaitProxy) and returns its verdict, in a
// span (SpanSeal) from the started proxy's probe budget to the log read that holds the
// verdict; a network not proved sealed marks it failed.
func (a *containerActor) awaitSeal(ctx context.Context, nets docker.Networks, id string) (v egresslog.SealVerdict, detail string, out []byte, err error) {
	ctx, end := a.span(ctx, SpanSeal)
	defer func() {
		names := map[egresslog.SealVerdict]string{egresslog.Sealed: "sealed", egresslog.SealBreached: "breached", egresslog.SealUnknown: "unknown"}
		trace.SpanFromContext(ctx).SetAttributes(KeySeal.String(names[v]))
		if err == nil && v != egresslog.Sealed {
			end(fmt.Errorf("the network is not proved sealed: %s", detail))
			return
		}
		end(err)
	}()
	out, err = a.awaitProxy(ctx, nets, id, true)
	if err != nil {
		return egresslog.SealUnknown, "", nil, err
	}
	v, detail = egresslog.ParseSeal(out)
	return v, detail, out, nil
}

// awaitProxy polls the proxy's log until it says it is listening, or — when prove — until
// its seal line says it will not, within the readiness budget. It returns the log read.
func (a *containerActor) awaitProxy(ctx context.Context, nets docker.Networks, id string, prove bool) ([]byte, error) {
	deadline := time.Now().Add(readinessBudget)
	if prove {
		// The probe writes its verdict only after every attempt has had its budget, so no
		// read before then can find it; the polls begin when it is due.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(egresslog.DefaultSealBudget):
		}
	}
	for pause := readinessFirst; ; pause = min(2*pause, readinessLongest) {
		out, err := nets.ProxyLogs(ctx, id, readinessTail, readinessMaxRead)
		if err == nil {
			if bytes.Contains(out, []byte(egresslog.ReadyMarker)) {
				return out, nil
			}
			if v, _ := egresslog.ParseSeal(out); prove && v == egresslog.SealBreached {
				return out, nil
			}
		}
		left := time.Until(deadline)
		if left <= 0 {
			if prove {
				return out, nil // no verdict: the caller refuses the network
			}
			return nil, errors.New("it never reported listening")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(pause, left)):
		}
	}
}

// discardUnsealed tears down what an unsealed network holds — the workload, if one was
// attached or this acquire created one, then the network — and says what became of it. The
// proxy is already gone.
func (a *containerActor) discardUnsealed(nets docker.Networks, netID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	_, err := a.b.engine.Remove(ctx, a.name)
	a.forget()
	if err != nil {
		return fmt.Sprintf("its workload %s could not be removed: %v; it is unclean", a.name, err)
	}
	if _, err := nets.NetworkRemove(ctx, netID); err != nil {
		return fmt.Sprintf("the network could not be removed: %v; remove it by hand", err)
	}
	return "the network was removed"
}

func (b *Backend) outboundNetwork() string {
	if b.cfg.OutboundNetwork != "" {
		return b.cfg.OutboundNetwork
	}
	return docker.DefaultOutboundNetwork
}

// verifyEgress is §1.7: four reads before hand-out, each an exact set. On failure N is
// removed (it may hold processes on the wrong topology) and the acquire fails with the reason.
func (a *containerActor) verifyEgress(ctx context.Context, run *egressRun) error {
	if run == nil {
		return nil
	}
	if err := a.joinEgress(run, nil); err != nil {
		return err
	}
	reason := a.topologyProblem(ctx, run)
	if reason == "" {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.b.commandTimeout())
	defer cancel()
	_, err := a.b.engine.Remove(rctx, a.name)
	a.forget()
	if err != nil {
		return fmt.Errorf("egress topology of %s failed its check: %s; %s could not be removed and is unclean: %w", a.name, reason, a.name, err)
	}
	return fmt.Errorf("egress topology of %s failed its check: %s; %s was removed", a.name, reason, a.name)
}

func (a *containerActor) topologyProblem(ctx context.Context, run *egressRun) string {
	netName, proxyName := docker.NetworkName(a.name), docker.ProxyName(a.name)
	// The three reads are independent: ask them at once, judge them in order.
	var (
		wg         sync.WaitGroup
		n          docker.NetworkInfo
		w, p       docker.ContainerInfo
		werr, perr error
	)
	wg.Add(2)
	go func() { defer wg.Done(); w, werr = a.b.engine.Inspect(ctx, a.name) }()
	go func() { defer wg.Done(); p, perr = a.b.engine.Inspect(ctx, run.proxyID) }()
	n, err := run.nets.NetworkInspect(ctx, netName)
	wg.Wait()
	if err != nil {
		return fmt.Sprintf("network %s could not be read: %v", netName, err)
	}
	if r := bridgeProblem(n, a.b.topology()); r != "" {
		return fmt.Sprintf("network %s: %s", netName, r)
	}
	if err := werr; err != nil {
		return fmt.Sprintf("workload %s could not be read: %v", a.name, err)
	}
	if !w.Running {
		// A gated workload whose command the gate could not find stops at once (as its
		// start would have failed without the gate); its log says why.
		return fmt.Sprintf("workload %s is not running (%s, exit code %d): its command did not start; see its log", a.name, w.Status, w.ExitCode)
	}
	if got := slices.Sorted(maps.Keys(w.Networks)); !slices.Equal(got, []string{netName}) {
		return fmt.Sprintf("workload %s is attached to %v, not exactly [%s]", a.name, got, netName)
	}
	var extra []string
	attached := map[string]bool{}
	for _, c := range n.Containers {
		if c == a.name || c == proxyName {
			attached[c] = true
			continue
		}
		extra = append(extra, c)
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return fmt.Sprintf("network %s has unexpected endpoints %v; disconnect or remove them, then retry", netName, extra)
	}
	if !attached[a.name] || !attached[proxyName] {
		return fmt.Sprintf("network %s has endpoints %v, not exactly [%s %s]", netName, slices.Sorted(maps.Values(n.Containers)), a.name, proxyName)
	}
	if err := perr; err != nil {
		return fmt.Sprintf("proxy %s could not be read: %v", proxyName, err)
	}
	want := []string{netName, a.b.outboundNetwork()}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(p.Networks)); !slices.Equal(got, want) {
		return fmt.Sprintf("proxy %s is attached to %v, not exactly %v", proxyName, got, want)
	}
	return ""
}

// removeNetwork removes a network by ID on its own bounded context, logging a failure: a
// leftover network is an infrastructure leak, not a refusal (§1.9).
func (a *containerActor) removeNetwork(nets docker.Networks, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), a.b.commandTimeout())
	defer cancel()
	if _, err := nets.NetworkRemove(ctx, id); err != nil {
		a.log.Warn("remove egress network", zap.String("network_id", id), zap.Error(err))
	}
}

// teardownProxy drains and removes the proxy ref names (§3.2 then §3.4). With no observer it
// only removes it, by name. nil means removed or absent.
func (b *Backend) teardownProxy(ctx context.Context, ref string, caller *sandbox.Key, trigger egresslog.Trigger) error {
	return b.drainRemove(ctx, ref, "", caller, trigger)
}

// drainRemove is the drain of §3.2 followed by the removal by the inspected ID and the
// publication rule of §3.4: the window is reported observed only when the removal of that
// same ID succeeded or found it absent. A failed, timed-out or cancelled removal publishes
// nothing; the surviving proxy is drained again by the next attempt.
func (b *Backend) drainRemove(ctx context.Context, ref, expectedID string, caller *sandbox.Key, trigger egresslog.Trigger) error {
	if !b.observing() {
		_, err := b.engine.Remove(ctx, ref)
		return err
	}
	window, id, err := b.drain(ctx, ref, expectedID, caller, trigger)
	if err != nil {
		return err
	}
	if id == "" {
		return nil // absent: nothing to remove
	}
	b.recordPending(ctx, window)
	outcome, err := b.engine.Remove(ctx, id)
	if err != nil {
		if window != nil {
			b.log.Info("proxy removal failed; its drained window is discarded and read again by the next removal",
				zap.String("container_id", id), zap.Error(err))
		}
		return fmt.Errorf("remove proxy %s: %w", id, err)
	}
	if window != nil && (outcome == docker.Removed || outcome == docker.Absent) {
		window.Removal = windowRemoval(outcome)
		b.deliverWindow(ctx, *window)
	}
	return nil
}

// drain is steps 1–5 of §3.2. It returns the window to publish after removal (nil when there
// is nothing to publish) and the ID to remove ("" when the proxy is absent). An inspect that
// fails leaves the proxy to the next attempt: nothing is removed on a name alone.
func (b *Backend) drain(ctx context.Context, ref, expectedID string, caller *sandbox.Key, trigger egresslog.Trigger) (*sandbox.EgressWindow, string, error) {
	began := time.Now()
	info, err := b.engine.Inspect(ctx, ref)
	switch {
	case isNotFound(err):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("inspect proxy %s: %w", ref, err)
	case info.ID == "":
		return nil, "", fmt.Errorf("inspect proxy %s: no ID", ref)
	case expectedID != "" && info.ID != expectedID:
		// Another generation holds the name now; the one we meant is gone.
		return nil, "", nil
	case info.Labels[label.Role] != label.RoleProxy:
		return nil, "", fmt.Errorf("%s is not an egress proxy (no %s=%s label); left in place", ref, label.Role, label.RoleProxy)
	}
	key, status := egresslog.Attribute(info.Labels, caller)
	if !status.Attributed() {
		b.log.Info("proxy window cannot be attributed; it goes unreported", zap.String("container_id", info.ID),
			zap.String("attribution", string(status)))
		return nil, info.ID, nil
	}
	nets := b.engine
	w := &sandbox.EgressWindow{ProxyID: info.ID, ProxyName: info.Name, Kind: info.Labels[label.Kind], Key: key, Backend: BackendName,
		Attribution: string(status), PrivateCIDRs: info.Labels[label.PrivateCIDRs], Trigger: string(trigger), Closed: true}
	stopNote := ""
	if err := nets.ProxyStop(ctx, info.ID, proxyStopGrace); err != nil && !isNotFound(err) {
		stopNote = fmt.Sprintf("the proxy could not be stopped: %v; decisions after this read may be missing", err)
		w.Closed = false
	}
	w.End = time.Now()
	out, err := nets.ProxyLogs(ctx, info.ID, egresslog.TailLines+1, egresslog.LogMaxBytes)
	switch {
	case isNotFound(err):
		w.Unreadable = "the inspected proxy disappeared before its log could be read"
	case err != nil:
		w.Unreadable = err.Error()
	default:
		decisions, tr, perr := egresslog.ParseLog(bytes.NewReader(out), egresslog.WithTimestamps())
		w.Decisions, w.Truncated = decisions, tr.Truncated()
		if perr != nil {
			w.Unreadable = perr.Error()
		}
	}
	if stopNote != "" {
		if w.Unreadable != "" {
			w.Unreadable = stopNote + "; " + w.Unreadable
		} else {
			w.Unreadable = stopNote
		}
	}
	w.DrainSeconds = time.Since(began).Seconds()
	if len(w.Decisions) == 0 && w.Unreadable == "" {
		return nil, info.ID, nil
	}
	return w, info.ID, nil
}

// recordPending reports w (nil: nothing drained) pending, before its proxy's removal.
func (b *Backend) recordPending(ctx context.Context, w *sandbox.EgressWindow) {
	if obs := b.observer(); obs != nil && w != nil {
		obs.EgressPending(context.WithoutCancel(ctx), *w)
	}
}

// windowRemoval is a removal's outcome as a window carries it.
func windowRemoval(o docker.RemoveOutcome) string {
	if o == docker.Absent {
		return sandbox.RemovalAbsent
	}
	return sandbox.RemovalRemoved
}
