package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/moby/moby/client"
)

// This file is the [Inventory] seam over the Engine API: the reaper's listings, inspections and
// removals, every one by full ID.

var _ Inventory = (*API)(nil)

// ListContainerIDs implements [Inventory].
func (a *API) ListContainerIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	args := append([]string{"ps", "-a", "--no-trunc", "-q"}, filterArgs(labelFilters)...)
	var ids []string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: apiFilters(labelFilters)})
		if err != nil {
			return apiError(args, err, nil)
		}
		for _, c := range res.Items {
			ids = append(ids, c.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	return checkIDs("list containers", ids)
}

// ListNetworkIDs implements [Inventory].
func (a *API) ListNetworkIDs(ctx context.Context, labelFilters map[string]string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	args := append([]string{"network", "ls", "--no-trunc", "-q"}, filterArgs(labelFilters)...)
	var ids []string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.NetworkList(ctx, client.NetworkListOptions{Filters: apiFilters(labelFilters)})
		if err != nil {
			return apiError(args, err, nil)
		}
		for _, n := range res.Items {
			ids = append(ids, n.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	return checkIDs("list networks", ids)
}

// checkIDs refuses a listing holding anything but full IDs, as the CLI's does.
func checkIDs(what string, ids []string) ([]string, error) {
	for _, id := range ids {
		if !fullID.MatchString(id) {
			return nil, fmt.Errorf("%s: unreadable answer: %q is not a full ID", what, id)
		}
	}
	return ids, nil
}

// InspectContainerID implements [Inventory]. Created is the engine's text, verbatim.
func (a *API) InspectContainerID(ctx context.Context, id string) (Resource, error) {
	if err := checkID("inspect container", id); err != nil {
		return Resource{}, err
	}
	args := []string{"container", "inspect", id}
	var r Resource
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		var doc inventoryContainerDoc
		if err := json.Unmarshal(res.Raw, &doc); err != nil {
			return fmt.Errorf("unreadable answer: %w", err)
		}
		r = Resource{ID: doc.ID, Name: strings.TrimPrefix(doc.Name, "/"), Labels: doc.Config.Labels,
			Created: doc.Created, Running: doc.State.Running}
		return nil
	})
	if err != nil {
		return Resource{}, fmt.Errorf("inspect container %s: %w", id, err)
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return r, nil
}

// InspectNetworkID implements [Inventory]. Created is the engine's text, verbatim.
func (a *API) InspectNetworkID(ctx context.Context, id string) (Resource, error) {
	if err := checkID("inspect network", id); err != nil {
		return Resource{}, err
	}
	args := []string{"network", "inspect", id}
	var r Resource
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		var doc inventoryNetworkDoc
		if err := json.Unmarshal(res.Raw, &doc); err != nil {
			return fmt.Errorf("unreadable answer: %w", err)
		}
		r = Resource{ID: doc.ID, Name: doc.Name, Labels: doc.Labels, Created: doc.Created,
			Containers: make([]string, 0, len(doc.Containers))}
		for cid := range doc.Containers {
			r.Containers = append(r.Containers, cid)
		}
		sort.Strings(r.Containers)
		return nil
	})
	if err != nil {
		return Resource{}, fmt.Errorf("inspect network %s: %w", id, err)
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return r, nil
}

// RemoveContainerID implements [Inventory]: a forced removal by ID, as [API.Remove].
func (a *API) RemoveContainerID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove container", id); err != nil {
		return 0, err
	}
	return a.Remove(ctx, id)
}

// RemoveNetworkID implements [Inventory]: never forced; a network with endpoints is refused by
// the engine and left in place.
func (a *API) RemoveNetworkID(ctx context.Context, id string) (RemoveOutcome, error) {
	if err := checkID("remove network", id); err != nil {
		return 0, err
	}
	out, err := a.removeNetwork(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("remove network %s: %w", id, err)
	}
	return out, nil
}

// EngineID returns the daemon's ID (system info's ID), as [CLI.EngineID] does; see [Driver].
func (a *API) EngineID(ctx context.Context) (string, error) {
	args := []string{"info", "--format", "{{.ID}}"}
	var id string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.Info(ctx, client.InfoOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		id = strings.TrimSpace(res.Info.ID)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("engine id: %w", err)
	}
	if id == "" || strings.ContainsAny(id, " \t\r\n") {
		return "", fmt.Errorf("engine id: unreadable answer %q", id)
	}
	return id, nil
}

// SecurityOptions implements [SecurityOptionser].
func (a *API) SecurityOptions(ctx context.Context) ([]string, error) {
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
