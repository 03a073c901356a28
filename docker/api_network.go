package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/go-units"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/mafsandbox/engine/label"
)

// This file is the [Networks] seam over the Engine API: the requests network.go renders as the
// docker command lines they stand for, as engine structs, with their classes read from status
// classes.

var _ Networks = (*Engine)(nil)

// NetworkCreate implements [Networks]. The request is written here rather than through the
// Moby client, which no longer sends CheckDuplicate: an engine before API 1.44 creates a second
// network of the same name without it. The engine answers a taken name with a conflict (409),
// or a forbidden (403) on older versions; a refused option with an invalid-parameter answer
// (400), and the gateway-mode options are the only options this request carries.
func (a *Engine) NetworkCreate(ctx context.Context, spec NetworkSpec) (string, error) {
	if err := checkTarget(spec.Name); err != nil {
		return "", fmt.Errorf("create network: %w", err)
	}
	labels, err := mergeLabels(spec.Labels, a.cfg.Labels)
	if err != nil {
		return "", fmt.Errorf("create network %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	args := cliNetworkCreateArgs(spec)
	req := networkCreateRequest{
		Name:           spec.Name,
		CheckDuplicate: true,
		Driver:         "bridge",
		Internal:       true,
		Options:        networkOptions(spec.Topology),
		Labels:         labelMap(spec.Labels),
	}
	if spec.Subnet.IsValid() {
		req.IPAM = &networkIPAM{Driver: "default", Config: []networkIPAMConfig{{Subnet: spec.Subnet.String()}}}
	}
	var id string
	err = a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		var res struct {
			ID string `json:"Id"`
		}
		err := b.postJSON(ctx, "/networks/create", req, &res)
		var ans *apiAnswer
		switch {
		case err == nil:
			id = res.ID
			return nil
		case !errors.As(err, &ans):
			return err
		case isSubnetOverlap([]byte(ans.Error())):
			return apiFailure(args, ans, ErrSubnetOverlap)
		case cerrdefs.IsConflict(ans), cerrdefs.IsPermissionDenied(ans):
			return apiFailure(args, ans, ErrNetworkExists)
		case cerrdefs.IsInvalidArgument(ans):
			return apiFailure(args, ans, ErrGatewayModeRejected)
		}
		return apiFailure(args, ans, apiClass(ans))
	})
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("create network %s: the engine returned no network ID", spec.Name)
	}
	return id, nil
}

// networkCreateRequest is the engine's network create body, with the CheckDuplicate field
// engines before API 1.44 read (later ones always check and ignore it).
type networkCreateRequest struct {
	Name           string            `json:"Name"`
	CheckDuplicate bool              `json:"CheckDuplicate"`
	Driver         string            `json:"Driver"`
	Internal       bool              `json:"Internal"`
	Options        map[string]string `json:"Options"`
	Labels         map[string]string `json:"Labels"`
	IPAM           *networkIPAM      `json:"IPAM,omitempty"`
}

type networkIPAM struct {
	Driver string              `json:"Driver"`
	Config []networkIPAMConfig `json:"Config"`
}

type networkIPAMConfig struct {
	Subnet string `json:"Subnet"`
}

// NetworkInspect implements [Networks]. The engine's JSON is read as `docker network inspect`
// prints it (parseNetworkInspect).
func (a *Engine) NetworkInspect(ctx context.Context, ref string) (NetworkInfo, error) {
	if err := checkTarget(ref); err != nil {
		return NetworkInfo{}, fmt.Errorf("inspect network: %w", err)
	}
	return query(ctx, a, []string{"network", "inspect", ref},
		func(ctx context.Context, c *client.Client) (client.NetworkInspectResult, error) {
			return c.NetworkInspect(ctx, ref, client.NetworkInspectOptions{})
		},
		func(res client.NetworkInspectResult) (NetworkInfo, error) { return parseNetworkInspect(ref, res.Raw) })
}

// NetworkConnect implements [Networks].
func (a *Engine) NetworkConnect(ctx context.Context, network, ctr string) error {
	if err := checkTarget(network); err != nil {
		return fmt.Errorf("connect network: %w", err)
	}
	if err := checkTarget(ctr); err != nil {
		return fmt.Errorf("connect network: %w", err)
	}
	args := []string{"network", "connect", network, ctr}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		if _, err := b.client.NetworkConnect(ctx, network, client.NetworkConnectOptions{Container: ctr}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
}

// NetworkRemove implements [Networks].
func (a *Engine) NetworkRemove(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkTarget(id); err != nil {
		return 0, fmt.Errorf("remove network: %w", err)
	}
	return a.removeNetwork(ctx, id)
}

func (a *Engine) removeNetwork(ctx context.Context, id string) (RemoveOutcome, error) {
	return a.remove(ctx, []string{"network", "rm", id}, func(ctx context.Context, b *apiBound) error {
		_, err := b.client.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
		return err
	})
}

// apiProxyCreateOptions renders spec as the create request of [cliProxyCreateArgs]: read-only,
// every capability dropped, no new privileges, the pids, memory and user limits, bounded
// json-file logs, attached to spec.Network only, the image's own command.
func apiProxyCreateOptions(spec ProxySpec) (client.ContainerCreateOptions, error) {
	pids, err := strconv.ParseInt(proxyPidsLimit, 10, 64)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	mem, err := units.RAMInBytes(proxyMemory)
	if err != nil {
		return client.ContainerCreateOptions{}, err
	}
	cfg := &container.Config{
		Image:  spec.Image,
		User:   proxyUser,
		Env:    append(append([]string(nil), spec.Env...), spec.SecretEnv...),
		Labels: labelMap(spec.Labels),
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.Network),
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "16m", "max-file": "2"}},
	}
	hc.PidsLimit = &pids
	hc.Memory = mem
	if spec.Sealed {
		applySeal(hc)
	}
	opts := client.ContainerCreateOptions{Name: spec.Name, Config: cfg, HostConfig: hc}
	if spec.IPv4.IsValid() {
		opts.NetworkingConfig = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			spec.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: spec.IPv4}}}}
	}
	return opts, nil
}

// ProxyCreate implements [Networks]. The Engine API never pulls on create, so a missing image
// is the create's 404.
func (a *Engine) ProxyCreate(ctx context.Context, spec ProxySpec) (string, error) {
	spec, err := spec.withLabels(a.cfg.Labels)
	if err != nil {
		return "", err
	}
	opts, err := apiProxyCreateOptions(spec)
	if err != nil {
		return "", fmt.Errorf("create proxy %s: %w", spec.Name, err)
	}
	args := cliProxyCreateArgs(spec)
	var id string
	err = a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerCreate(ctx, opts)
		if err != nil {
			var class error
			switch {
			case !isAnswer(err):
			case cerrdefs.IsConflict(err):
				class = ErrConflict
			case cerrdefs.IsNotFound(err):
				class = ErrImageMissing
			}
			return apiError(args, err, class)
		}
		id = res.ID
		return nil
	})
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("create proxy %s: the engine returned no container ID", spec.Name)
	}
	return id, nil
}

// ProxyStart implements [Networks].
func (a *Engine) ProxyStart(ctx context.Context, id string) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("start proxy: %w", err)
	}
	return a.Start(ctx, id)
}

// ProxyStop implements [Networks]: the engine's stop with grace, in whole seconds as `stop
// --time`.
func (a *Engine) ProxyStop(ctx context.Context, id string, grace time.Duration) error {
	if err := checkTarget(id); err != nil {
		return fmt.Errorf("stop proxy: %w", err)
	}
	args := cliProxyStopArgs(id, grace)
	secs := int(grace.Round(time.Second) / time.Second)
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		if _, err := b.client.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
}

// errLogsFull ends a log read that holds its byte bound.
var errLogsFull = errors.New("log bound reached")

// boundedBuffer keeps at most max bytes and then fails, which stops the demultiplexer.
type boundedBuffer struct {
	buf bytes.Buffer
	max int
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		return room, errLogsFull
	}
	return w.buf.Write(p)
}

// ProxyLogs implements [Networks]: the last tail lines of stdout with the engine's timestamps,
// at most maxBytes+1 bytes read; the stream is closed as soon as that many are held.
func (a *Engine) ProxyLogs(ctx context.Context, id string, tail, maxBytes int) ([]byte, error) {
	if err := checkTarget(id); err != nil {
		return nil, fmt.Errorf("read proxy log: %w", err)
	}
	if tail <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("read proxy log %s: %w: tail and byte bound must be positive", id, ErrInvalid)
	}
	args := cliProxyLogsArgs(id, tail)
	out := &boundedBuffer{max: maxBytes + 1}
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		rc, err := b.client.ContainerLogs(ctx, id, client.ContainerLogsOptions{
			ShowStdout: true, Timestamps: true, Tail: strconv.Itoa(tail),
		})
		if err != nil {
			return apiError(args, err, nil)
		}
		defer rc.Close()
		if _, err := stdcopy.StdCopy(out, discard{}, rc); err != nil && !errors.Is(err, errLogsFull) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: read proxy log %s: %w", ErrUnreachable, id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out.buf.Bytes(), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// labelMap is labels as the engine takes them; a later label of the same key wins, as with
// repeated --label flags.
func labelMap(labels []label.Label) map[string]string {
	m := make(map[string]string, len(labels))
	for _, l := range labels {
		m[l.Key] = l.Value
	}
	return m
}

// isSubnetOverlap reads the daemon's refusal of a subnet another network holds, which it
// answers with the same status as other invalid requests, so only its words tell it apart:
//
//	Error response from daemon: Pool overlaps with other one on this address space
func isSubnetOverlap(text []byte) bool {
	return strings.Contains(strings.ToLower(stderrText(text)), "pool overlaps")
}
