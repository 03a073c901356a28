package docker

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/docker/go-units"
)

// Defaults of [Config] fields left zero.
const (
	DefaultDockerPath       = "docker"
	DefaultOutboundNetwork  = "bridge"
	DefaultCommandTimeout   = 60 * time.Second
	defaultImagePullTimeout = 600 * time.Second
	defaultPidsLimit        = 512
)

// Config is the driver's configuration. It reads no environment variables and carries no image,
// work directory, allowlist or transfer cap: those belong to each sandbox's spec. A driver keeps
// its own copy, so changing a Config after construction changes nothing.
type Config struct {
	// DockerPath is the Docker CLI binary, a name looked up on PATH or a path. Default "docker".
	// Binding runs it once, to resolve the client's context (section 3 of the spec); every
	// call after that speaks the Engine API. The Podman CLI is not supported: binding reads
	// Docker's context-inspect JSON.
	DockerPath string
	// EgressProxyImage opts in to allowlisted egress. Empty means no proxy is configured.
	EgressProxyImage string
	// OutboundNetwork is the existing network a proxy's outbound leg joins. Default "bridge".
	OutboundNetwork string
	// CommandTimeout bounds every lifecycle and file-plane invocation. It does not bound exec,
	// which the caller's context bounds. Default 60 s.
	CommandTimeout time.Duration
	// ImagePullTimeout bounds an image pull. Default 600 s.
	ImagePullTimeout time.Duration
	// PidsLimit is the --pids-limit of every workload container, and the most a spec may ask
	// for (sandbox.Resources). Default 512; always passed.
	PidsLimit int
	// Memory, when set, is the --memory of workload containers ("512m", "2g"), and the most a
	// spec may ask for; unset, a spec's ask is the only bound.
	Memory string
	// CPUs, when set, is the --cpus of workload containers, and the most a spec may ask for;
	// unset, a spec's ask is the only bound.
	CPUs *float64
	// CapAdd are the capabilities given back to every workload container after --cap-drop
	// ALL, which is always passed: each one of [AddableCapabilities], named as Docker names it
	// ("CHOWN"); anything else is refused. Empty (the default): the workload has none.
	CapAdd []string
	// EgressPrivateCIDRs are private blocks the egress proxy may dial although they are not
	// globally routable. Never admits loopback, link-local or metadata addresses. A block
	// wider than any private range (a /0) is refused ([*PrivateCIDRError]).
	EgressPrivateCIDRs []netip.Prefix
	// EgressSubnetPool is the IPv4 range every allowlisted sandbox's internal network takes a
	// /29 from (subnet.go). The zero prefix means DefaultEgressSubnetPool.
	EgressSubnetPool netip.Prefix
	// Labels are extra labels written on every resource this driver creates, after its own.
	// Keys under label.Prefix are refused. Tests put their session label here.
	Labels map[string]string
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config { return Config{}.withDefaults() }

// withDefaults returns a copy of c with zero fields set to their defaults and its map and slices
// copied, so the caller's later edits cannot reach it.
func (c Config) withDefaults() Config {
	if c.DockerPath == "" {
		c.DockerPath = DefaultDockerPath
	}
	if c.OutboundNetwork == "" {
		c.OutboundNetwork = DefaultOutboundNetwork
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.ImagePullTimeout == 0 {
		c.ImagePullTimeout = defaultImagePullTimeout
	}
	if c.PidsLimit == 0 {
		c.PidsLimit = defaultPidsLimit
	}
	if c.CPUs != nil {
		v := *c.CPUs
		c.CPUs = &v
	}
	c.EgressPrivateCIDRs = slices.Clone(c.EgressPrivateCIDRs)
	c.Labels = maps.Clone(c.Labels)
	c.CapAdd = canonicalCaps(c.CapAdd)
	return c
}

// CheckConfig refuses, as [ErrInvalid], a configuration no driver could honour, before any
// driver is built: a flag's bad value is named at start rather than at the first create.
func CheckConfig(c Config) error { return c.withDefaults().validate() }

// validate refuses a configuration no command could honour.
func (c Config) validate() error {
	switch {
	case c.CommandTimeout < 0:
		return fmt.Errorf("config: %w: CommandTimeout is negative", ErrInvalid)
	case c.ImagePullTimeout < 0:
		return fmt.Errorf("config: %w: ImagePullTimeout is negative", ErrInvalid)
	case c.PidsLimit < 0:
		return fmt.Errorf("config: %w: PidsLimit is negative", ErrInvalid)
	case c.CPUs != nil && (math.IsNaN(*c.CPUs) || math.IsInf(*c.CPUs, 0) || *c.CPUs <= 0):
		return fmt.Errorf("config: %w: CPUs must be a positive finite number", ErrInvalid)
	}
	if c.Memory != "" {
		if m, err := units.RAMInBytes(c.Memory); err != nil || m <= 0 {
			return fmt.Errorf("config: %w: Memory %q is not a positive size (512m, 2g)", ErrInvalid, c.Memory)
		}
	}
	if err := checkCapAdd(c.CapAdd); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if _, err := mergeLabels(nil, c.Labels); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	for _, p := range c.EgressPrivateCIDRs {
		if err := checkPrivateCIDR(p); err != nil {
			return fmt.Errorf("config: EgressPrivateCIDRs: %w", err)
		}
	}
	return nil
}

// WorkloadOpts returns the hardening and limit options this configuration puts on every workload
// container: no-new-privileges, the pids limit, every capability dropped and the allowed ones
// given back ([Config.CapAdd]), and the memory and CPUs when set.
func (c Config) WorkloadOpts() []CreateOpt {
	c = c.withDefaults()
	opts := []CreateOpt{withNoNewPrivileges(), withPidsLimit(c.PidsLimit), withCapDropAll()}
	if len(c.CapAdd) > 0 {
		opts = append(opts, withCapAdd(c.CapAdd...))
	}
	if c.Memory != "" {
		opts = append(opts, withMemory(c.Memory))
	}
	if c.CPUs != nil {
		opts = append(opts, withCPUs(*c.CPUs))
	}
	return opts
}

// Bounds are a configuration's ceilings on one workload's resources, as numbers: the memory
// in bytes, the CPUs, the pids. Zero memory or CPUs: no ceiling. A spec may ask for less
// ([WithLimits]); the backend refuses more before it creates anything.
type Bounds struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int
}

// Bounds returns the ceilings this configuration puts on every workload. It assumes a
// configuration that validates: an unparsable Memory counts as no ceiling.
func (c Config) Bounds() Bounds {
	c = c.withDefaults()
	b := Bounds{Pids: c.PidsLimit}
	if c.Memory != "" {
		b.MemoryBytes, _ = units.RAMInBytes(c.Memory)
	}
	if c.CPUs != nil {
		b.CPUs = *c.CPUs
	}
	return b
}
