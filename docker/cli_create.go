package docker

import (
	"context"
	"fmt"
	"strings"
)

// Run implements [Engine]. Config.Labels are appended after the spec's labels.
func (c *cliDriver) Run(ctx context.Context, spec CreateSpec) (string, error) {
	return c.make(ctx, spec, cliRunArgs)
}

// Create implements [Engine].
func (c *cliDriver) Create(ctx context.Context, spec CreateSpec) (string, error) {
	return c.make(ctx, spec, cliCreateArgs)
}

func (c *cliDriver) make(ctx context.Context, spec CreateSpec, render func(CreateSpec) []string) (string, error) {
	labels, err := mergeLabels(spec.Labels, c.cfg.Labels)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	if err := spec.validate(); err != nil {
		return "", err
	}
	args := render(spec)
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fail(args, spec.Name, res)
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) == 0 {
		return "", fmt.Errorf("create container %s: the client printed no container ID", spec.Name)
	}
	return lines[len(lines)-1], nil
}
