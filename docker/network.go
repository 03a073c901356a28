package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/label"
)

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
	Labels   []label.Label // in command-line order; Config.Labels are appended
	Topology Topology      // "" means TopologyIsolatedGateway
	Subnet   netip.Prefix  // the zero prefix leaves the subnet to the daemon's pools
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
	// SecretEnv are K=V set after Env and kept off every command line: the rendering names
	// `-e K` alone, and the value goes only into the create request, so no process listing or
	// error shows it.
	SecretEnv []string
	Labels    []label.Label // in command-line order; Config.Labels are appended
	Sealed    bool          // the workload's seal constraints (sealCapDrop, sealSysctls) apply
	// IPv4, when valid, is the proxy's fixed address on Network (--ip): the workload gate
	// dials it for its release.
	IPv4 netip.Addr
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
	if s.IPv4.IsValid() {
		args = append(args, "--ip", s.IPv4.String())
	}
	if s.Sealed {
		args = append(args, sealArgs()...)
	}
	for _, e := range s.Env {
		args = append(args, "-e", e)
	}
	for _, e := range s.SecretEnv {
		name, _, _ := strings.Cut(e, "=")
		args = append(args, "-e", name) // the value comes from the client's environment
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

// withLabels checks the spec the engine is given and returns it with the configuration's
// extra labels merged in: names, image and network must be neither empty nor dash-led, and
// every label must pass the label rules.
func (spec ProxySpec) withLabels(extra map[string]string) (ProxySpec, error) {
	for _, v := range []string{spec.Name, spec.Image, spec.Network} {
		if v == "" || strings.HasPrefix(v, "-") {
			return spec, fmt.Errorf("create proxy %s: %w: empty or dash-led name, image or network", spec.Name, ErrInvalid)
		}
	}
	labels, err := checkedLabels(spec.Labels, extra)
	if err != nil {
		return spec, fmt.Errorf("create proxy %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	return spec, nil
}
