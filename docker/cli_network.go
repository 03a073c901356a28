package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

var _ Networks = (*cliDriver)(nil)

// The stderr phrases of the network seam. Like cli_stderr.go, only this file's classifiers
// read them.
//
//	network create: Error response from daemon: network with name N-net already exists
//	network create: Error response from daemon: invalid gateway mode "isolated" for com.docker.network.bridge.gateway_mode_ipv4 (engine 27)
//	create:         Error response from daemon: Conflict. The container name "/N-proxy" is already in use by container "…"
//	create:         Error response from daemon: No such image: maf-sandbox/egress-proxy:local (with --pull never)
func classifyNetwork(args []string, target string, stderr []byte) error {
	if isUnreachable(stderr) {
		return ErrUnreachable
	}
	switch {
	case len(args) > 1 && args[0] == "network" && args[1] == "create":
		if containsFold(stderr, "already exists") {
			return ErrNetworkExists
		}
		if isSubnetOverlap(stderr) {
			return ErrSubnetOverlap
		}
		if containsFold(stderr, "gateway_mode_ipv4") || containsFold(stderr, "gateway_mode_ipv6") {
			return ErrGatewayModeRejected
		}
	case len(args) > 0 && args[0] == "create":
		if containsFold(stderr, "already in use") {
			return ErrConflict
		}
		if containsFold(stderr, "no such image") || containsFold(stderr, "unable to find image") {
			return ErrImageMissing
		}
	}
	if isTargetAbsent(stderr, target) {
		return ErrNotFound
	}
	return nil
}

// isSubnetOverlap reads the daemon's refusal of a subnet another network holds (CLI stderr
// and API answer alike):
//
//	Error response from daemon: Pool overlaps with other one on this address space
func isSubnetOverlap(text []byte) bool { return containsFold(text, "pool overlaps") }

func (c *cliDriver) netControl(ctx context.Context, target string, args []string) (result, error) {
	res, err := c.control(ctx, args...)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classifyNetwork(args, target, res.Stderr)}
	}
	return res, nil
}

func lastField(b []byte) string {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// NetworkCreate implements [Networks].
func (c *cliDriver) NetworkCreate(ctx context.Context, spec NetworkSpec) (string, error) {
	if err := checkTarget(spec.Name); err != nil {
		return "", fmt.Errorf("create network: %w", err)
	}
	labels, err := mergeLabels(spec.Labels, c.cfg.Labels)
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	res, err := c.netControl(ctx, spec.Name, cliNetworkCreateArgs(spec))
	if err != nil {
		return "", err
	}
	id := lastField(res.Stdout)
	if id == "" {
		return "", fmt.Errorf("create network %s: the client printed no network ID", spec.Name)
	}
	return id, nil
}

// NetworkInspect implements [Networks].
func (c *cliDriver) NetworkInspect(ctx context.Context, ref string) (NetworkInfo, error) {
	if err := checkTarget(ref); err != nil {
		return NetworkInfo{}, fmt.Errorf("inspect network: %w", err)
	}
	res, err := c.netControl(ctx, ref, []string{"network", "inspect", "--format", "{{json .}}", ref})
	if err != nil {
		return NetworkInfo{}, err
	}
	return parseNetworkInspect(ref, res.Stdout)
}

// NetworkConnect implements [Networks].
func (c *cliDriver) NetworkConnect(ctx context.Context, network, container string) error {
	if err := checkTarget(network); err != nil {
		return fmt.Errorf("connect network: %w", err)
	}
	if err := checkTarget(container); err != nil {
		return fmt.Errorf("connect network: %w", err)
	}
	_, err := c.netControl(ctx, container, []string{"network", "connect", network, container})
	return err
}

// NetworkRemove implements [Networks].
func (c *cliDriver) NetworkRemove(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkTarget(id); err != nil {
		return 0, fmt.Errorf("remove network: %w", err)
	}
	_, err := c.netControl(ctx, id, []string{"network", "rm", id})
	if errors.Is(err, ErrNotFound) {
		return Absent, nil
	}
	if err != nil {
		return 0, err
	}
	return Removed, nil
}

// ProxyCreate implements [Networks].
func (c *cliDriver) ProxyCreate(ctx context.Context, spec ProxySpec) (string, error) {
	spec, err := spec.withLabels(c.cfg.Labels)
	if err != nil {
		return "", err
	}
	args := cliProxyCreateArgs(spec)
	res, err := c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout, env: spec.SecretEnv})
	if err == nil && res.ExitCode != 0 {
		err = &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classifyNetwork(args, spec.Name, res.Stderr)}
	}
	if err != nil {
		return "", err
	}
	id := lastField(res.Stdout)
	if id == "" {
		return "", fmt.Errorf("create proxy %s: the client printed no container ID", spec.Name)
	}
	return id, nil
}

// ProxyStart implements [Networks].
func (c *cliDriver) ProxyStart(ctx context.Context, id string) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	_, err := c.netControl(ctx, id, []string{"start", id})
	return err
}

// ProxyStop implements [Networks].
func (c *cliDriver) ProxyStop(ctx context.Context, id string, grace time.Duration) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("stop proxy: %w", err)
	}
	_, err := c.netControl(ctx, id, cliProxyStopArgs(id, grace))
	return err
}

// ProxyLogs implements [Networks]. Only stdout is kept: the proxy writes its decisions there.
func (c *cliDriver) ProxyLogs(ctx context.Context, id string, tail, maxBytes int) ([]byte, error) {
	if err := checkTarget(id); err != nil {
		return nil, fmt.Errorf("read proxy log: %w", err)
	}
	if tail <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("read proxy log %s: %w: tail and byte bound must be positive", id, ErrInvalid)
	}
	args := cliProxyLogsArgs(id, tail)
	res, err := c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout, readLimit: maxBytes + 1})
	if err != nil {
		return nil, err
	}
	if !res.Stopped && res.ExitCode != 0 {
		return nil, &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classifyNetwork(args, id, res.Stderr)}
	}
	return res.Stdout, nil
}
