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
	cmd := s.Cmd
	if cmd == nil {
		cmd = KeepAlive
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
	hc := &container.HostConfig{NetworkMode: "none"}
	var nc *network.NetworkingConfig
	if s.Network != "" && s.Network != "none" {
		hc.NetworkMode = container.NetworkMode(s.Network)
		if s.IPv4.IsValid() {
			nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				s.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: s.IPv4}}}}
		}
		for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
			cfg.Env = append(cfg.Env, v+"="+s.ProxyURL)
		}
	}
	if s.NoNewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges"}
	}
	if s.PidsLimit > 0 {
		n := int64(s.PidsLimit)
		hc.PidsLimit = &n
	}
	if s.CapDropAll {
		hc.CapDrop = []string{"ALL"}
	}
	if s.Sealed && s.Network != "" && s.Network != "none" {
		applySeal(hc)
	}
	if s.Memory != "" {
		m, err := units.RAMInBytes(s.Memory)
		if err != nil {
			return client.ContainerCreateOptions{}, fmt.Errorf("create spec: %w: memory %q: %v", ErrInvalid, s.Memory, err)
		}
		hc.Memory = m
	}
	if s.CPUs != nil {
		text := pyFloatRepr(*s.CPUs)
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			return client.ContainerCreateOptions{}, fmt.Errorf("create spec: %w: cpus %s is not a number", ErrInvalid, text)
		}
		r.Mul(r, big.NewRat(1e9, 1))
		if !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() <= 0 {
			return client.ContainerCreateOptions{}, fmt.Errorf("create spec: %w: cpus %s is too precise or out of range", ErrInvalid, text)
		}
		hc.NanoCPUs = r.Num().Int64()
	}
	return client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: hc, NetworkingConfig: nc}, nil
}
