package docker

import (
	"fmt"
	"math/big"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// apiCreateOptions renders s as the create request the docker client sends for the command line
// [cliRunArgs] renders: the same flags, parsed the way the client parses them (--memory with
// go-units, --cpus as an exact decimal), into the engine's structs. A detached run attaches no
// stream. A value the client would refuse is [ErrInvalid], before any engine call.
func apiCreateOptions(s CreateSpec) (client.ContainerCreateOptions, error) {
	cfg := apiContainerConfig(s)
	hc := &container.HostConfig{NetworkMode: "none"}
	nc := apiAttach(s, cfg, hc)
	cfg.Env = append(cfg.Env, s.Env...) // after the proxy variables, as on the command line
	apiHarden(s, hc)
	if err := apiLimits(s, hc); err != nil {
		return client.ContainerCreateOptions{}, err
	}
	return client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: hc, NetworkingConfig: nc}, nil
}

// apiContainerConfig is the image, command, entrypoint and labels of s.
func apiContainerConfig(s CreateSpec) *container.Config {
	cmd := s.Cmd
	if cmd == nil {
		cmd = KeepAlive()
	}
	cfg := &container.Config{
		Image:  s.Image,
		Cmd:    append([]string(nil), cmd...),
		Labels: make(map[string]string, len(s.Labels)),
	}
	for _, l := range s.Labels {
		cfg.Labels[l.Key] = l.Value // a later label of the same key wins, as with --label
	}
	if s.Entrypoint != "" {
		cfg.Entrypoint = []string{s.Entrypoint}
	}
	return cfg
}

// apiAttach puts a container of s on its network (--network, --ip) with the proxy in its
// environment; nil networking config when s stays on none or takes any free address.
func apiAttach(s CreateSpec, cfg *container.Config, hc *container.HostConfig) *network.NetworkingConfig {
	if !s.attached() {
		return nil
	}
	hc.NetworkMode = container.NetworkMode(s.Network)
	for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		cfg.Env = append(cfg.Env, v+"="+s.ProxyURL)
	}
	if s.TrustFile != "" {
		for _, v := range trustVariables {
			cfg.Env = append(cfg.Env, v+"="+s.TrustFile)
		}
	}
	if !s.IPv4.IsValid() {
		return nil
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		s.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: s.IPv4}}}}
}

// apiHarden applies the hardening flags in the order the command line gives them: the seal's
// capability drops come after --cap-drop ALL.
func apiHarden(s CreateSpec, hc *container.HostConfig) {
	if s.NoNewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges"}
	}
	if s.PidsLimit > 0 {
		n := int64(s.PidsLimit)
		hc.PidsLimit = &n
	}
	if s.CapDropAll {
		hc.CapDrop = []string{"ALL"}
		hc.CapAdd = append([]string(nil), s.CapAdd...)
	}
	if s.Sealed && s.attached() {
		applySeal(hc)
	}
}

// apiLimits parses --memory and --cpus as the client does; a value it would refuse is
// [ErrInvalid].
func apiLimits(s CreateSpec, hc *container.HostConfig) error {
	if s.Memory != "" {
		m, err := units.RAMInBytes(s.Memory)
		if err != nil {
			return fmt.Errorf("create spec: %w: memory %q: %v", ErrInvalid, s.Memory, err)
		}
		hc.Memory = m
	}
	if s.CPUs != nil {
		n, err := apiNanoCPUs(*s.CPUs)
		if err != nil {
			return err
		}
		hc.NanoCPUs = n
	}
	return nil
}

// apiNanoCPUs is --cpus in billionths, exact: the decimal the command line shows, not the
// float's binary value.
func apiNanoCPUs(cpus float64) (int64, error) {
	text := pyFloatRepr(cpus)
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, fmt.Errorf("create spec: %w: cpus %s is not a number", ErrInvalid, text)
	}
	r.Mul(r, big.NewRat(1e9, 1))
	if !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() <= 0 {
		return 0, fmt.Errorf("create spec: %w: cpus %s is too precise or out of range", ErrInvalid, text)
	}
	return r.Num().Int64(), nil
}
