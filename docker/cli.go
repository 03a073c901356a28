package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
)

// cliDriver is the [Engine] over the docker client binary. Every operation spawns one client
// process (never through a shell) with the environment captured at construction. It is safe for
// concurrent use.
type cliDriver struct {
	cfg   Config
	log   *zap.Logger
	inst  instruments
	env   []string
	bound *bindOnce[bound]
}

// ExecStarter reports that the CLI cannot tell when an exec's process started: its client
// says nothing until the command ends.
func (c *cliDriver) ExecStarter() (ExecStarter, bool) { return nil, false }

// TypeStater reports that the CLI has no stat cheaper than [cliDriver.Stat].
func (c *cliDriver) TypeStater() (TypeStater, bool) { return nil, false }

// newCLIDriver returns a cliDriver for cfg (zero fields take their defaults) and snapshots the
// process environment: every child it spawns gets that snapshot, never the live environment. It
// makes no engine call; the daemon is bound on first use. It fails with [ErrInvalid] for a
// configuration no command could honour (for example a label under [label.Prefix]).
func newCLIDriver(cfg Config, opts ...Option) (*cliDriver, error) {
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cliDriver{
		cfg:   cfg,
		log:   o.log.Named("docker"),
		inst:  newInstruments(o),
		env:   os.Environ(),
		bound: newBindOnce[bound](),
	}, nil
}

// Config returns the configuration the CLI runs with, defaults filled in.
func (c *cliDriver) Config() Config { return c.cfg.withDefaults() }

// inspectDoc is the part of `container inspect` this package reads.
type inspectDoc struct {
	ID      string `json:"Id"`
	Name    string `json:"Name"`
	Image   string `json:"Image"`
	Created string `json:"Created"`
	State   struct {
		Status    string `json:"Status"`
		Running   bool   `json:"Running"`
		Paused    bool   `json:"Paused"`
		ExitCode  int    `json:"ExitCode"`
		Pid       int    `json:"Pid"`
		StartedAt string `json:"StartedAt"`
	} `json:"State"`
	Config struct {
		Image      string            `json:"Image"`
		User       string            `json:"User"`
		Labels     map[string]string `json:"Labels"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
	} `json:"Config"`
	HostConfig struct {
		CapDrop []string `json:"CapDrop"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]struct {
			NetworkID string `json:"NetworkID"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// inspectJSON is the answer of `container inspect --format {{json .}} target`, which the
// container's inspect and its confinement inspect read, each its own part of it.
func (c *cliDriver) inspectJSON(ctx context.Context, target string) ([]byte, error) {
	if err := checkTarget(target); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	args := []string{"container", "inspect", "--format", "{{json .}}", target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fail(args, target, res)
	}
	return res.Stdout, nil
}

// Inspect implements [Engine].
func (c *cliDriver) Inspect(ctx context.Context, target string) (ContainerInfo, error) {
	answer, err := c.inspectJSON(ctx, target)
	if err != nil {
		return ContainerInfo{}, err
	}
	var doc inspectDoc
	if err := json.Unmarshal(answer, &doc); err != nil {
		return ContainerInfo{}, fmt.Errorf("inspect %s: unreadable answer: %w", target, err)
	}
	if doc.ID == "" {
		return ContainerInfo{}, fmt.Errorf("inspect %s: answer without an ID", target)
	}
	info := ContainerInfo{
		ID:         doc.ID,
		Name:       strings.TrimPrefix(doc.Name, "/"),
		Image:      doc.Config.Image,
		ImageID:    doc.Image,
		Status:     doc.State.Status,
		Running:    doc.State.Running,
		Paused:     doc.State.Paused,
		ExitCode:   doc.State.ExitCode,
		Labels:     doc.Config.Labels,
		User:       strings.TrimSpace(doc.Config.User),
		Entrypoint: doc.Config.Entrypoint,
		Cmd:        doc.Config.Cmd,
		CapDrop:    doc.HostConfig.CapDrop,
		Networks:   make(map[string]string, len(doc.NetworkSettings.Networks)),
	}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	for name, n := range doc.NetworkSettings.Networks {
		info.Networks[name] = n.NetworkID
	}
	if t, err := time.Parse(time.RFC3339Nano, doc.Created); err == nil {
		info.Created = t
	}
	info.Pid = doc.State.Pid
	if t, err := time.Parse(time.RFC3339Nano, doc.State.StartedAt); err == nil {
		info.StartedAt = t
	}
	return info, nil
}

// ImageExists implements [Engine].
func (c *cliDriver) ImageExists(ctx context.Context, image string) (bool, error) {
	if err := checkImage("image exists", image); err != nil {
		return false, err
	}
	args := []string{"image", "inspect", "--format", "{{.Id}}", image}
	res, err := c.control(ctx, args...)
	if err != nil {
		return false, err
	}
	if res.ExitCode == 0 {
		return true, nil
	}
	if err := fail(args, image, res); !errors.Is(err, ErrNotFound) {
		return false, err
	}
	return false, nil
}

// ImageEntrypoint implements [Engine].
func (c *cliDriver) ImageEntrypoint(ctx context.Context, image string) ([]string, bool, error) {
	if err := checkImage("image entrypoint", image); err != nil {
		return nil, false, err
	}
	args := []string{"image", "inspect", "--format", "{{json .Config.Entrypoint}}", image}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, false, err
	}
	if res.ExitCode != 0 {
		if err := fail(args, image, res); !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
		return nil, false, nil
	}
	var ep []string
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &ep); err != nil {
		return nil, false, fmt.Errorf("docker %s: the entrypoint is not a JSON list: %w", strings.Join(args, " "), err)
	}
	return ep, true, nil
}

// Start implements [Engine].
func (c *cliDriver) Start(ctx context.Context, target string) error {
	return c.simple(ctx, "start", target)
}

// Rename implements [Engine].
func (c *cliDriver) Rename(ctx context.Context, target, newName string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if err := checkTarget(newName); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	args := []string{"rename", target, newName}
	res, err := c.control(ctx, args...)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fail(args, target, res)
	}
	return nil
}

// Pause implements [Engine].
func (c *cliDriver) Pause(ctx context.Context, target string) error {
	return c.simple(ctx, "pause", target)
}

// Unpause implements [Engine].
func (c *cliDriver) Unpause(ctx context.Context, target string) error {
	err := c.simple(ctx, "unpause", target)
	if errors.Is(err, errNotPaused) || errors.Is(err, ErrNotFound) {
		c.log.Debug("unpause found nothing to lift", zap.String("container", target), zap.Error(err))
		return nil
	}
	return err
}

func (c *cliDriver) simple(ctx context.Context, verb, target string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	args := []string{verb, target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fail(args, target, res)
	}
	return nil
}

// Remove implements [Engine]. Both the 20.10 client and current ones exit 0 for a missing
// target (printing "No such container" on stderr); only stdout echoing the target proves a
// removal.
func (c *cliDriver) Remove(ctx context.Context, target string) (RemoveOutcome, error) {
	if err := checkTarget(target); err != nil {
		return 0, fmt.Errorf("remove: %w", err)
	}
	return removeForced(ctx, func(ctx context.Context) (RemoveOutcome, error) { return c.removeOnce(ctx, target) })
}

// removeOnce is one `rm -f` of target.
func (c *cliDriver) removeOnce(ctx context.Context, target string) (RemoveOutcome, error) {
	args := []string{"rm", "-f", target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return 0, err
	}
	if res.ExitCode == 0 {
		if strings.TrimSpace(string(res.Stdout)) == target {
			return Removed, nil
		}
		return Absent, nil
	}
	if err := fail(args, target, res); !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	return Absent, nil
}

// ListNames implements [Engine].
func (c *cliDriver) ListNames(ctx context.Context, labelFilters map[string]string, nameFilter string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	args := []string{"ps", "-a", "--format", "{{.Names}}"}
	args = append(args, filterArgs(labelFilters)...)
	if nameFilter != "" {
		args = append(args, "--filter", "name="+nameFilter)
	}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("list containers: %w", fail(args, "", res))
	}
	var names []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names, nil
}
