package docker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
)

// The allowlist topology per daemon version (docs/architecture.md, "Allowlisted egress").
// A sandbox's internal network must leave the host no address the workload can reach:
//
//   - Docker Engine 28.0.0 and newer: --internal with both isolated gateway modes, which
//     give the bridge no host address of either family;
//   - older Linux daemons with the bridge driver: --internal with inhibit_ipv4, which gives
//     the bridge no IPv4 address (the IPv4 equivalent of the isolated mode, as Moby's own
//     change introducing it says). The host keeps its IPv6 link-local address on the bridge,
//     which no daemon option removes below 28: the workload's own constraints (IPv6 disabled
//     in its namespace, no NET_RAW) make it unreachable, and the seal probe proves it.
//
// Neither is ever created with --ipv6. Every network gets an explicit subnet from the egress
// subnet pool (subnet.go).

// Topology is how an allowlisted sandbox's internal network is sealed from the host.
type Topology string

const (
	// TopologyIsolatedGateway: both isolated gateway modes (Engine 28.0.0+).
	TopologyIsolatedGateway Topology = "isolated-gateway"
	// TopologyInhibitIPv4: --internal and inhibit_ipv4 (older Linux daemons).
	TopologyInhibitIPv4 Topology = "inhibit-ipv4"
)

// OptInhibitIPv4 keeps the daemon from giving the bridge an IPv4 address.
const OptInhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// The workload's seal constraints on an allowlisted network: no raw sockets (no crafted ARP,
// SYN or ICMPv6 past the kernel's routing), and no IPv6 at all in its namespace.
var (
	sealCapDrop = []string{"NET_RAW"}
	sealSysctls = map[string]string{
		"net.ipv6.conf.all.disable_ipv6":     "1",
		"net.ipv6.conf.default.disable_ipv6": "1",
	}
)

// ErrSubnetOverlap: network create was refused because its subnet overlaps a network the
// daemon already has; the next candidate of the pool is tried.
var ErrSubnetOverlap = errors.New("docker: subnet overlaps another network")

// TopologyFor chooses the topology for a Linux daemon of the given server version ("20.10.24",
// "28.2.2", "20.10.24+dfsg1"). A version it cannot read is an error.
func TopologyFor(version string) (Topology, error) {
	v := strings.TrimSpace(version)
	major, _, ok := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if !ok || err != nil || n <= 0 {
		return "", fmt.Errorf("%w: daemon version %q is not MAJOR.MINOR…", ErrInvalid, version)
	}
	if n >= 28 {
		return TopologyIsolatedGateway, nil
	}
	return TopologyInhibitIPv4, nil
}

// sealArgs are the command-line flags of the seal constraints, in a fixed order.
func sealArgs() []string {
	var args []string
	for _, c := range sealCapDrop {
		args = append(args, "--cap-drop", c)
	}
	for _, k := range slices.Sorted(maps.Keys(sealSysctls)) {
		args = append(args, "--sysctl", k+"="+sealSysctls[k])
	}
	return args
}

// networkOptions are the driver options of a network of topology t.
func networkOptions(t Topology) map[string]string {
	if t == TopologyInhibitIPv4 {
		return map[string]string{OptInhibitIPv4: "true"}
	}
	return map[string]string{OptGatewayModeIPv4: GatewayIsolated, OptGatewayModeIPv6: GatewayIsolated}
}

// applySeal puts the seal constraints on an Engine API host config, as sealArgs does on a
// command line.
func applySeal(hc *container.HostConfig) {
	hc.CapDrop = append(hc.CapDrop, sealCapDrop...)
	if hc.Sysctls == nil {
		hc.Sysctls = map[string]string{}
	}
	maps.Copy(hc.Sysctls, sealSysctls)
}

// Subnets lists the network's IPAM subnets, for logs.
func (n NetworkInfo) Subnets() []string {
	out := make([]string, 0, len(n.IPAM))
	for _, c := range n.IPAM {
		out = append(out, c.Subnet)
	}
	return out
}
