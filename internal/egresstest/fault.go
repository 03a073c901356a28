// Package egresstest is the test-only fault injection of the allowlist topology: it breaks an
// internal network's seal the way a misconfigured host would, so the tests can show that the
// seal proof catches it. Nothing in the engine imports it (graph_test.go fails if actors or
// cmd/engine ever link it); tests hand its functions to actors.WithEgressNetworkHook.
package egresstest

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
)

var networkID = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// BridgeName is the Linux bridge interface the daemon gives a user-defined bridge network:
// "br-" and the first 12 hex digits of its ID.
func BridgeName(id string) (string, error) {
	if !networkID.MatchString(id) {
		return "", fmt.Errorf("bridge of network %q: not a network ID", id)
	}
	return "br-" + id[:12], nil
}

// GiveBridgeAHostAddress gives the host the first address of network id's subnet on the
// network's bridge, as root — what inhibit_ipv4 and the isolated gateway modes exist to
// prevent — and returns that address. The address goes with the bridge when the network is
// removed. The test process must be root on the daemon's host (the development machines and
// CI are).
func GiveBridgeAHostAddress(ctx context.Context, id string) (string, error) {
	bridge, err := BridgeName(id)
	if err != nil {
		return "", err
	}
	out, err := run(ctx, "docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", id)
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(out) {
		p, err := netip.ParsePrefix(f)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		addr := p.Masked().Addr().Next()
		if _, err := run(ctx, "ip", "addr", "add", netip.PrefixFrom(addr, p.Bits()).String(), "dev", bridge); err != nil {
			return addr.String(), err
		}
		return addr.String(), nil
	}
	return "", fmt.Errorf("network %s has no IPv4 subnet: %q", id, out)
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
