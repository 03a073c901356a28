package docker

import (
	"context"
	"strings"

	"github.com/moby/moby/client"
)

// ServerVersion implements [Engine].
func (c *CLI) ServerVersion(ctx context.Context) (string, error) {
	args := []string{"version", "--format", "{{.Server.Version}}"}
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fail(args, "", res)
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// ServerVersion implements [Engine].
func (a *API) ServerVersion(ctx context.Context) (string, error) {
	args := []string{"version", "--format", "{{.Server.Version}}"}
	var version string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		v, err := b.client.ServerVersion(ctx, client.ServerVersionOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		version = strings.TrimSpace(v.Version)
		return nil
	})
	return version, err
}
