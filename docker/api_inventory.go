package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// This file is the [Inventory] seam over the Engine API: the reaper's listings, inspections and
// removals, every one by full ID.

var _ Inventory = (*Engine)(nil)

// ListContainerIDs implements [Inventory].
func (a *Engine) ListContainerIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	ids, err := query(ctx, a, append([]string{"ps", "-a", "--no-trunc", "-q"}, filterArgs(labelFilters)...),
		func(ctx context.Context, c *client.Client) (client.ContainerListResult, error) {
			return c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: apiFilters(labelFilters)})
		},
		func(res client.ContainerListResult) ([]string, error) {
			var ids []string
			for _, c := range res.Items {
				ids = append(ids, c.ID)
			}
			return ids, nil
		})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return checkIDs("list containers", ids)
}

// ListNetworkIDs implements [Inventory].
func (a *Engine) ListNetworkIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	ids, err := query(ctx, a, append([]string{"network", "ls", "--no-trunc", "-q"}, filterArgs(labelFilters)...),
		func(ctx context.Context, c *client.Client) (client.NetworkListResult, error) {
			return c.NetworkList(ctx, client.NetworkListOptions{Filters: apiFilters(labelFilters)})
		},
		func(res client.NetworkListResult) ([]string, error) {
			var ids []string
			for _, n := range res.Items {
				ids = append(ids, n.ID)
			}
			return ids, nil
		})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	return checkIDs("list networks", ids)
}

// checkIDs refuses a listing holding anything but full IDs.
func checkIDs(what string, ids []string) ([]string, error) {
	for _, id := range ids {
		if !fullID.MatchString(id) {
			return nil, fmt.Errorf("%s: unreadable answer: %q is not a full ID", what, id)
		}
	}
	return ids, nil
}

// InspectContainerID implements [Inventory]. Created is the engine's text, verbatim.
func (a *Engine) InspectContainerID(ctx context.Context, id string) (Resource, error) {
	if err := checkID("inspect container", id); err != nil {
		return Resource{}, err
	}
	doc, err := query(ctx, a, []string{"container", "inspect", id},
		func(ctx context.Context, c *client.Client) (client.ContainerInspectResult, error) {
			return c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		},
		func(res client.ContainerInspectResult) (inventoryContainerDoc, error) {
			return decodeInventoryDoc[inventoryContainerDoc](res.Raw)
		})
	if err != nil {
		return Resource{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	return doc.resource(), nil
}

// InspectNetworkID implements [Inventory]. Created is the engine's text, verbatim.
func (a *Engine) InspectNetworkID(ctx context.Context, id string) (Resource, error) {
	if err := checkID("inspect network", id); err != nil {
		return Resource{}, err
	}
	doc, err := query(ctx, a, []string{"network", "inspect", id},
		func(ctx context.Context, c *client.Client) (client.NetworkInspectResult, error) {
			return c.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		},
		func(res client.NetworkInspectResult) (inventoryNetworkDoc, error) {
			return decodeInventoryDoc[inventoryNetworkDoc](res.Raw)
		})
	if err != nil {
		return Resource{}, fmt.Errorf("inspect network %s: %w", id, err)
	}
	return doc.resource(), nil
}

// RemoveContainerID implements [Inventory]: a forced removal by ID, as [Engine.Remove].
func (a *Engine) RemoveContainerID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove container", id); err != nil {
		return 0, err
	}
	return a.Remove(ctx, id)
}

// RemoveNetworkID implements [Inventory]: never forced; a network with endpoints is refused by
// the engine and left in place.
func (a *Engine) RemoveNetworkID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove network", id); err != nil {
		return 0, err
	}
	out, err := a.removeNetwork(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("remove network %s: %w", id, err)
	}
	return out, nil
}

// EngineID returns the daemon's ID (system info's ID); see [Driver].
func (a *Engine) EngineID(ctx context.Context) (string, error) {
	answer, err := query(ctx, a, []string{"info", "--format", "{{.ID}}"},
		func(ctx context.Context, c *client.Client) (client.SystemInfoResult, error) {
			return c.Info(ctx, client.InfoOptions{})
		},
		func(res client.SystemInfoResult) (string, error) { return res.Info.ID, nil })
	if err != nil {
		return "", fmt.Errorf("engine id: %w", err)
	}
	return engineID(answer)
}

// SecurityOptions implements [Driver].
func (a *Engine) SecurityOptions(ctx context.Context) ([]string, error) {
	args := []string{"info", "--format", "{{json .SecurityOptions}}"}
	var opts []string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.Info(ctx, client.InfoOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		opts = res.Info.SecurityOptions
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("security options: %w", err)
	}
	return opts, nil
}
