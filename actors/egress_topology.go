package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
)

// The allowlist topology as this backend serves it: chosen by what the daemon can do when the
// backend binds (docker.TopologyFor on a Linux daemon's version), asked again on every cold
// allowlisted acquire like the OS family, with every network's subnet from the egress pool
// and every new network's seal proved by the proxy before its outbound leg exists
// (docs/architecture.md, "Allowlisted egress").

// topologyState is what the backend knows of the daemon's allowlist topology.
type topologyState struct {
	mu       sync.Mutex
	topology docker.Topology // "" until a Linux daemon's version was read
	targets  []netip.Addr    // the seal probe's host addresses, read once
	gate     []byte          // the workload gate from the proxy image, once gateRead
	gateRead bool            // the proxy image was read for its gate (nil gate: it has none)
	flight   flight[docker.Topology]
	sealed   sealCounts
}

type sealCounts struct{ proved, broken int }

// servesAllowlist reports whether the bound daemon can serve an allowlist with hosts: a
// proxy image is configured and a Linux daemon's topology is known. Declarations say so only
// then, so a declaration never offers what the daemon cannot serve.
func (b *Backend) servesAllowlist() bool {
	return b.cfg.EgressProxyImage != "" && b.topology() != ""
}

// topology is the last topology learned, "" when none (not bound, or not a Linux daemon).
func (b *Backend) topology() docker.Topology {
	b.topo.mu.Lock()
	defer b.topo.mu.Unlock()
	return b.topo.topology
}

// learnTopology reads the daemon's OS and version — once for concurrent cold acquires, and
// never an answer older than began — and records the topology it allows.
func (b *Backend) learnTopology(ctx context.Context, began time.Time) (docker.Topology, error) {
	return b.topo.flight.do(ctx, "", began, func(ctx context.Context) (docker.Topology, error) {
		// Both at once; the OS answer is the acquire's (recheckOS joins it).
		var (
			v    string
			verr error
		)
		got := make(chan struct{})
		go func() { defer close(got); v, verr = b.engine.ServerVersion(ctx) }()
		osName, err := b.osFlight.do(ctx, "", began, b.engine.ServerOS)
		<-got
		if err != nil {
			return "", fmt.Errorf("read the daemon's OS: %w", err)
		}
		if osName != "linux" {
			return "", &EgressTopologyError{Network: "-", Reason: fmt.Sprintf("the daemon runs %q, not linux", osName)}
		}
		if verr != nil {
			return "", fmt.Errorf("read the daemon's version: %w", verr)
		}
		t, err := docker.TopologyFor(v)
		if err != nil {
			return "", &EgressTopologyError{Network: "-", Reason: err.Error()}
		}
		b.topo.mu.Lock()
		if b.topo.topology != t {
			b.log.Info("allowlist topology", zap.String("daemon_version", v), zap.String("topology", string(t)))
		}
		b.topo.topology = t
		b.topo.mu.Unlock()
		return t, nil
	})
}

// subnetPool is the configured egress subnet pool.
func (b *Backend) subnetPool() (docker.SubnetPool, error) {
	base := b.cfg.EgressSubnetPool
	if !base.IsValid() {
		base = netip.MustParsePrefix(docker.DefaultEgressSubnetPool)
	}
	return docker.NewSubnetPool(base, docker.EgressSubnetBits)
}

// sealTargets are the host addresses the seal probe tries besides its own segment: the
// gateways of the default bridge and of the outbound network, read once. A read that fails
// leaves them out and is logged; the segment's own addresses are still tried.
func (b *Backend) sealTargets(ctx context.Context, nets docker.Networks) []netip.Addr {
	b.topo.mu.Lock()
	defer b.topo.mu.Unlock()
	if b.topo.targets != nil {
		return b.topo.targets
	}
	seen := map[netip.Addr]bool{}
	out := []netip.Addr{}
	for _, ref := range []string{docker.DefaultOutboundNetwork, b.outboundNetwork()} {
		n, err := nets.NetworkInspect(ctx, ref)
		if err != nil {
			b.log.Warn("seal targets: read network", zap.String("network", ref), zap.Error(err))
			return out // not cached: asked again next time
		}
		for _, c := range n.IPAM {
			if a, err := netip.ParseAddr(c.Gateway); err == nil && !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	b.topo.targets = out
	return out
}

// gateBinary returns the workload gate the proxy image carries, read from the proxy container
// proxyID (created, not started) the first time and kept: the image is the backend's. nil
// when the image has no gate, or one that predates the release by the proxy (an image built
// before it) — then workloads start after the proof — or when the read failed (asked again
// next time).
func (b *Backend) gateBinary(ctx context.Context, proxyID string) []byte {
	b.topo.mu.Lock()
	if b.topo.gateRead {
		defer b.topo.mu.Unlock()
		return b.topo.gate
	}
	b.topo.mu.Unlock()
	e, body, err := b.engine.Read(ctx, proxyID, gatePath, maxGateBytes)
	switch {
	case errors.Is(err, docker.ErrPathAbsent):
		b.log.Info("the egress proxy image carries no workload gate: allowlisted workloads start after their seal proof",
			zap.String("image", b.cfg.EgressProxyImage))
		body = nil
	case err != nil:
		b.log.Warn("read the workload gate from the proxy image", zap.Error(err))
		return nil
	case e == nil || len(body) == 0:
		b.log.Warn("the workload gate in the proxy image is not a regular file", zap.String("image", b.cfg.EgressProxyImage))
		body = nil
	case !bytes.Contains(body, []byte(gateProtocol)):
		b.log.Info("the egress proxy image's workload gate predates its release by the proxy: allowlisted workloads start after their seal proof; rebuild it with `engine images build`",
			zap.String("image", b.cfg.EgressProxyImage))
		body = nil
	}
	b.topo.mu.Lock()
	defer b.topo.mu.Unlock()
	if !b.topo.gateRead {
		b.topo.gate, b.topo.gateRead = body, true
	}
	return b.topo.gate
}

// knownGate returns the workload gate when the proxy image was already read for it (known).
func (b *Backend) knownGate() (gate []byte, known bool) {
	b.topo.mu.Lock()
	defer b.topo.mu.Unlock()
	return b.topo.gate, b.topo.gateRead
}

// countSeal records one seal proof's outcome and logs the running counts.
func (b *Backend) countSeal(network string, ok bool, detail string) {
	b.topo.mu.Lock()
	if ok {
		b.topo.sealed.proved++
	} else {
		b.topo.sealed.broken++
	}
	c := b.topo.sealed
	b.topo.mu.Unlock()
	log := b.log.With(zap.String("network", network), zap.String("seal", detail),
		zap.Int("seals_proved", c.proved), zap.Int("seals_broken", c.broken))
	if ok {
		log.Info("egress network sealed")
		return
	}
	log.Error("egress network not sealed: discarded")
}

// SealCounts reports how many new egress networks this backend proved sealed and how many
// it discarded because the probe reached the host.
func (b *Backend) SealCounts() (proved, broken int) {
	b.topo.mu.Lock()
	defer b.topo.mu.Unlock()
	return b.topo.sealed.proved, b.topo.sealed.broken
}
