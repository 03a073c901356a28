package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/moby/moby/client"
)

// apiFilters renders label filters as the engine's filter terms; an empty value means
// "present".
func apiFilters(labels map[string]string) client.Filters {
	f := client.Filters{}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := labels[k]; v != "" {
			f.Add("label", k+"="+v)
		} else {
			f.Add("label", k)
		}
	}
	return f
}

// ListNames implements [Containers]. Names are given as `docker ps --format {{.Names}}` prints them:
// without the leading "/", link names left out, several joined by ",".
func (a *Engine) ListNames(ctx context.Context, labelFilters map[string]string, nameFilter string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	f := apiFilters(labelFilters)
	if nameFilter != "" {
		f.Add("name", nameFilter)
	}
	args := append([]string{"ps", "-a", "--format", "{{.Names}}"}, filterArgs(labelFilters)...)
	var names []string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		res, err := b.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			return fmt.Errorf("list containers: %w", apiError(args, err, nil))
		}
		for _, c := range res.Items {
			var own []string
			for _, n := range c.Names {
				if n = strings.TrimPrefix(n, "/"); n != "" && !strings.Contains(n, "/") {
					own = append(own, n)
				}
			}
			if len(own) > 0 {
				names = append(names, strings.Join(own, ","))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}
