// Package egresstest is the test-only side of the allowlist topology (egress-and-reap.md
// §5.6): the override that lets a test exercise the topology on an engine older than 28.0.0,
// and nothing else. The package is internal, so library users cannot construct an
// [Override]; the shipped code path reads one only when a test hands it to
// actors.WithTopologyOverride. The offline fixture of §5.4 is built by the integration tests
// themselves (docs/testing.md), so that this package links no test machinery into the engine.
package egresstest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
)

// Override lifts the engine floor and the "no gateway address" check of the bridge for the
// backend it is given to, and in exchange removes the host's address from every internal
// bridge the backend creates or adopts, as root, so that the sandbox really has no route to
// the host. It must never reach a production backend.
type Override struct {
	flush func(ctx context.Context, bridge string) error
}

// NewOverride returns an override that runs `ip addr flush dev br-<12 hex>` on the host. The
// test process must be root on the engine's host (the development machines are).
func NewOverride() *Override {
	return &Override{flush: ipFlush}
}

var networkID = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// BridgeName is the Linux bridge interface the engine gives a user-defined bridge network:
// "br-" and the first 12 hex digits of its ID.
func BridgeName(id string) (string, error) {
	if !networkID.MatchString(id) {
		return "", fmt.Errorf("bridge of network %q: not a network ID", id)
	}
	return "br-" + id[:12], nil
}

// PrepareBridge removes every address of network id's bridge from the host. Flushing twice
// is harmless.
func (o *Override) PrepareBridge(ctx context.Context, id string) error {
	bridge, err := BridgeName(id)
	if err != nil {
		return err
	}
	return o.flush(ctx, bridge)
}

func ipFlush(ctx context.Context, bridge string) error {
	cmd := exec.CommandContext(ctx, "ip", "addr", "flush", "dev", bridge)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flush addresses of %s: %w: %s", bridge, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// NewOverrideFunc returns an override whose bridge preparation is flush (given the bridge's
// interface name): unit tests record the call instead of touching the host.
func NewOverrideFunc(flush func(ctx context.Context, bridge string) error) *Override {
	return &Override{flush: flush}
}
