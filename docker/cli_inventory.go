package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ListContainerIDs implements [Inventory]: `ps -a --no-trunc -q` with the label filters.
func (c *cliDriver) ListContainerIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	args := append([]string{"ps", "-a", "--no-trunc", "-q"}, filterArgs(labelFilters)...)
	return c.listIDs(ctx, "list containers", args)
}

// ListNetworkIDs implements [Inventory]: `network ls --no-trunc -q` with the label filters.
func (c *cliDriver) ListNetworkIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	args := append([]string{"network", "ls", "--no-trunc", "-q"}, filterArgs(labelFilters)...)
	return c.listIDs(ctx, "list networks", args)
}

func (c *cliDriver) listIDs(ctx context.Context, what string, args []string) ([]string, error) {
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("%s: %w", what, fail(args, "", res))
	}
	var ids []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if !fullID.MatchString(line) {
			return nil, fmt.Errorf("%s: unreadable answer: %q is not a full ID", what, line)
		}
		ids = append(ids, line)
	}
	return ids, nil
}

// InspectContainerID implements [Inventory].
func (c *cliDriver) InspectContainerID(ctx context.Context, id string) (Resource, error) {
	var doc inventoryContainerDoc
	if err := c.inspectID(ctx, "container", id, &doc); err != nil {
		return Resource{}, err
	}
	return doc.resource(), nil
}

// InspectNetworkID implements [Inventory].
func (c *cliDriver) InspectNetworkID(ctx context.Context, id string) (Resource, error) {
	var doc inventoryNetworkDoc
	if err := c.inspectID(ctx, "network", id, &doc); err != nil {
		return Resource{}, err
	}
	return doc.resource(), nil
}

func (c *cliDriver) inspectID(ctx context.Context, kind, id string, doc any) error {
	what := "inspect " + kind
	if err := checkID(what, id); err != nil {
		return err
	}
	args := []string{kind, "inspect", "--format", "{{json .}}", id}
	res, err := c.control(ctx, args...)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s %s: %w", what, id, fail(args, id, res))
	}
	if err := json.Unmarshal(res.Stdout, doc); err != nil {
		return fmt.Errorf("%s %s: unreadable answer: %w", what, id, err)
	}
	return nil
}

// RemoveContainerID implements [Inventory] through `rm -f <id>`; absence is read as
// [cliDriver.Remove] reads it.
func (c *cliDriver) RemoveContainerID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove container", id); err != nil {
		return 0, err
	}
	return c.Remove(ctx, id)
}

// RemoveNetworkID implements [Inventory] through `network rm <id>` (no force exists for it and
// none is emulated: nothing is disconnected).
func (c *cliDriver) RemoveNetworkID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove network", id); err != nil {
		return 0, err
	}
	args := []string{"network", "rm", id}
	res, err := c.control(ctx, args...)
	if err != nil {
		return 0, fmt.Errorf("remove network %s: %w", id, err)
	}
	if res.ExitCode == 0 {
		if strings.TrimSpace(string(res.Stdout)) == id {
			return Removed, nil
		}
		return Absent, nil
	}
	if err := fail(args, id, res); !errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("remove network %s: %w", id, err)
	}
	return Absent, nil
}

var _ Inventory = (*cliDriver)(nil)

// EngineID returns the daemon's ID (`docker info --format {{.ID}}`); see [Driver].
func (c *cliDriver) EngineID(ctx context.Context) (string, error) {
	args := []string{"info", "--format", "{{.ID}}"}
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("engine id: %w", err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("engine id: %w", fail(args, "", res))
	}
	return engineID(string(res.Stdout))
}

// SecurityOptions implements [SecurityOptionser].
func (c *cliDriver) SecurityOptions(ctx context.Context) ([]string, error) {
	args := []string{"info", "--format", "{{json .SecurityOptions}}"}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("security options: %w", err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("security options: %w", fail(args, "", res))
	}
	var opts []string
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &opts); err != nil {
		return nil, fmt.Errorf("security options: unreadable answer: %w", err)
	}
	return opts, nil
}
