package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Networks is the second, separate seam the allowlist topology needs (egress-and-reap.md §1.3,
// §1.5, §3.2): the per-sandbox internal network and the egress proxy container. It is kept
// apart from [Engine] so that an engine that cannot build the topology still serves closed
// sandboxes; a consumer type-asserts for it. Every method binds first and fails as [Engine]'s
// methods do ([ErrUnreachable], [ErrTimeout], the context's error, [*CommandError]).
type Networks interface {
	// NetworkCreate runs `network create --driver bridge --internal` with both isolated
	// gateway-mode options and spec's labels, and returns the network's ID. [ErrNetworkExists]
	// when the name is taken; [ErrGatewayModeRejected] when the engine refused an option naming
	// a gateway-mode key (an engine older than 28.0.0 that knows the key).
	NetworkCreate(ctx context.Context, spec NetworkSpec) (string, error)
	// NetworkInspect reads one network by name or ID. [ErrNotFound] when it is absent.
	NetworkInspect(ctx context.Context, ref string) (NetworkInfo, error)
	// NetworkConnect attaches container to network. [ErrNotFound] when either is absent.
	NetworkConnect(ctx context.Context, network, container string) error
	// NetworkRemove removes a network by ID, never forced: [Removed], or [Absent] when there
	// was none. A network with endpoints still attached is refused ([*CommandError]).
	NetworkRemove(ctx context.Context, id string) (RemoveOutcome, error)
	// ProxyCreate makes the proxy container of spec without starting it (`--pull never`, the
	// §1.5 hardening, attached to spec.Network only) and returns its ID. [ErrConflict] when the
	// name is in use; [ErrImageMissing] when the image is not present.
	ProxyCreate(ctx context.Context, spec ProxySpec) (string, error)
	// ProxyStart starts a created proxy by ID. [ErrNotFound] when it is absent.
	ProxyStart(ctx context.Context, id string) error
	// ProxyStop stops a proxy by ID after grace. [ErrNotFound] when it is absent.
	ProxyStop(ctx context.Context, id string, grace time.Duration) error
	// ProxyLogs returns the last tail lines of the proxy's stdout, with the engine's
	// timestamps, reading at most maxBytes+1 bytes (so a caller's parser can tell the cap was
	// reached). [ErrNotFound] when the proxy is absent.
	ProxyLogs(ctx context.Context, id string, tail, maxBytes int) ([]byte, error)
}

var _ Networks = (*CLI)(nil)

// Network-seam error classes.
var (
	// ErrGatewayModeRejected: network create was refused with an answer naming one of the
	// gateway-mode option keys (engine 27 rejects the "isolated" value).
	ErrGatewayModeRejected = errors.New("docker: gateway mode option rejected")
	// ErrImageMissing: the proxy image is not present and is never pulled.
	ErrImageMissing = errors.New("docker: image not present")
)

// The two isolated gateway-mode options (Docker Engine 28.0.0 and newer).
const (
	OptGatewayModeIPv4 = "com.docker.network.bridge.gateway_mode_ipv4"
	OptGatewayModeIPv6 = "com.docker.network.bridge.gateway_mode_ipv6"
	GatewayIsolated    = "isolated"
)

// NetworkSpec is one internal network to create.
type NetworkSpec struct {
	Name     string
	Labels   []Label      // in command-line order; Config.Labels are appended
	Topology Topology     // "" means TopologyIsolatedGateway
	Subnet   netip.Prefix // the zero prefix leaves the subnet to the daemon's pools
}

// NetworkInfo is what one network inspect returns.
type NetworkInfo struct {
	ID         string
	Name       string
	Driver     string
	Internal   bool
	IPAM       []IPAMConfig      // every entry, any family
	Options    map[string]string // the options the engine echoes back (not proof of effect)
	Labels     map[string]string
	Containers map[string]string // attached container ID → name
	Created    time.Time
}

// IPAMConfig is one IPAM entry of a network.
type IPAMConfig struct {
	Subnet  string
	Gateway string
}

// ProxySpec is the egress proxy container of one sandbox (egress-and-reap.md §1.5).
type ProxySpec struct {
	Name    string
	Image   string
	Network string   // N-net, the only network at create time
	Env     []string // K=V, in order
	Labels  []Label  // in command-line order; Config.Labels are appended
	Sealed  bool     // the workload's seal constraints (SealCapDrop, SealSysctls) apply
}

// Proxy hardening limits (egress-and-reap.md §1.5).
const (
	proxyPidsLimit = "64"
	proxyMemory    = "64m"
	proxyUser      = "65532:65532"
)

func cliNetworkCreateArgs(s NetworkSpec) []string {
	args := []string{"network", "create", "--driver", "bridge", "--internal"}
	opts := networkOptions(s.Topology)
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		args = append(args, "--opt", k+"="+opts[k])
	}
	if s.Subnet.IsValid() {
		args = append(args, "--subnet", s.Subnet.String())
	}
	for _, l := range s.Labels {
		args = append(args, "--label", l.Key+"="+l.Value)
	}
	return append(args, s.Name)
}

func cliProxyCreateArgs(s ProxySpec) []string {
	args := []string{"create", "--name", s.Name, "--pull", "never",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--pids-limit", proxyPidsLimit, "--memory", proxyMemory, "--user", proxyUser,
		"--log-driver", "json-file", "--log-opt", "max-size=16m", "--log-opt", "max-file=2",
		"--network", s.Network}
	if s.Sealed {
		args = append(args, sealArgs()...)
	}
	for _, e := range s.Env {
		args = append(args, "-e", e)
	}
	for _, l := range s.Labels {
		args = append(args, "--label", l.Key+"="+l.Value)
	}
	return append(args, s.Image)
}

func cliProxyStopArgs(id string, grace time.Duration) []string {
	return []string{"stop", "--time", strconv.Itoa(int(grace.Round(time.Second) / time.Second)), id}
}

func cliProxyLogsArgs(id string, tail int) []string {
	return []string{"logs", "--tail", strconv.Itoa(tail), "--timestamps", id}
}

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

func (c *CLI) netControl(ctx context.Context, target string, args []string) (result, error) {
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
func (c *CLI) NetworkCreate(ctx context.Context, spec NetworkSpec) (string, error) {
	if err := checkTarget(spec.Name); err != nil {
		return "", fmt.Errorf("create network: %w", err)
	}
	labels, err := MergeLabels(spec.Labels, c.cfg.Labels)
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

// networkDoc is the part of `network inspect` this package reads.
type networkDoc struct {
	ID       string `json:"Id"`
	Name     string `json:"Name"`
	Created  string `json:"Created"`
	Driver   string `json:"Driver"`
	Internal bool   `json:"Internal"`
	IPAM     struct {
		Config []struct {
			Subnet  string `json:"Subnet"`
			Gateway string `json:"Gateway"`
		} `json:"Config"`
	} `json:"IPAM"`
	Options    map[string]string `json:"Options"`
	Labels     map[string]string `json:"Labels"`
	Containers map[string]struct {
		Name string `json:"Name"`
	} `json:"Containers"`
}

// NetworkInspect implements [Networks].
func (c *CLI) NetworkInspect(ctx context.Context, ref string) (NetworkInfo, error) {
	if err := checkTarget(ref); err != nil {
		return NetworkInfo{}, fmt.Errorf("inspect network: %w", err)
	}
	res, err := c.netControl(ctx, ref, []string{"network", "inspect", "--format", "{{json .}}", ref})
	if err != nil {
		return NetworkInfo{}, err
	}
	return parseNetworkInspect(ref, res.Stdout)
}

func parseNetworkInspect(ref string, out []byte) (NetworkInfo, error) {
	var doc networkDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return NetworkInfo{}, fmt.Errorf("inspect network %s: unreadable answer: %w", ref, err)
	}
	if doc.ID == "" {
		return NetworkInfo{}, fmt.Errorf("inspect network %s: answer without an ID", ref)
	}
	info := NetworkInfo{ID: doc.ID, Name: doc.Name, Driver: doc.Driver, Internal: doc.Internal,
		Options: doc.Options, Labels: doc.Labels, Containers: make(map[string]string, len(doc.Containers))}
	for _, cfg := range doc.IPAM.Config {
		info.IPAM = append(info.IPAM, IPAMConfig{Subnet: cfg.Subnet, Gateway: cfg.Gateway})
	}
	for id, ctr := range doc.Containers {
		info.Containers[id] = ctr.Name
	}
	if info.Options == nil {
		info.Options = map[string]string{}
	}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	if t, err := time.Parse(time.RFC3339Nano, doc.Created); err == nil {
		info.Created = t
	}
	return info, nil
}

// NetworkConnect implements [Networks].
func (c *CLI) NetworkConnect(ctx context.Context, network, container string) error {
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
func (c *CLI) NetworkRemove(ctx context.Context, id string) (RemoveOutcome, error) {
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

// withLabels checks the spec both drivers are given and returns it with the configuration's
// extra labels merged in: names, image and network must be neither empty nor dash-led, and
// every label must pass the label rules.
func (spec ProxySpec) withLabels(extra map[string]string) (ProxySpec, error) {
	for _, v := range []string{spec.Name, spec.Image, spec.Network} {
		if v == "" || strings.HasPrefix(v, "-") {
			return spec, fmt.Errorf("create proxy %s: %w: empty or dash-led name, image or network", spec.Name, ErrInvalid)
		}
	}
	labels, err := MergeLabels(spec.Labels, extra)
	if err != nil {
		return spec, fmt.Errorf("create proxy %s: %w", spec.Name, err)
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return spec, fmt.Errorf("create proxy %s: %w", spec.Name, err)
		}
	}
	spec.Labels = labels
	return spec, nil
}

// ProxyCreate implements [Networks].
func (c *CLI) ProxyCreate(ctx context.Context, spec ProxySpec) (string, error) {
	spec, err := spec.withLabels(c.cfg.Labels)
	if err != nil {
		return "", err
	}
	res, err := c.netControl(ctx, spec.Name, cliProxyCreateArgs(spec))
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
func (c *CLI) ProxyStart(ctx context.Context, id string) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	_, err := c.netControl(ctx, id, []string{"start", id})
	return err
}

// ProxyStop implements [Networks].
func (c *CLI) ProxyStop(ctx context.Context, id string, grace time.Duration) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("stop proxy: %w", err)
	}
	_, err := c.netControl(ctx, id, cliProxyStopArgs(id, grace))
	return err
}

// ProxyLogs implements [Networks]. Only stdout is kept: the proxy writes its decisions there.
func (c *CLI) ProxyLogs(ctx context.Context, id string, tail, maxBytes int) ([]byte, error) {
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
