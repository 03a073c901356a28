package docker

import (
	"context"
	"strings"

	"github.com/moby/moby/client"
)

// The daemon's version answer, read by both drivers the same way: ServerOS for the guest OS
// family, ServerVersion for the allowlist topology.

// ServerOS implements [Engine].
func (c *cliDriver) ServerOS(ctx context.Context) (string, error) {
	name, err := c.serverField(ctx, "{{.Server.Os}}")
	return strings.ToLower(name), err
}

// ServerVersion implements [Engine].
func (c *cliDriver) ServerVersion(ctx context.Context) (string, error) {
	return c.serverField(ctx, "{{.Server.Version}}")
}

// serverField runs `docker version --format format` and returns its trimmed output.
func (c *cliDriver) serverField(ctx context.Context, format string) (string, error) {
	args := []string{"version", "--format", format}
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fail(args, "", res)
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

// ServerOS implements [Engine].
func (a *apiDriver) ServerOS(ctx context.Context) (string, error) {
	name, err := a.serverField(ctx, "{{.Server.Os}}", func(v client.ServerVersionResult) string { return v.Os })
	return strings.ToLower(name), err
}

// ServerVersion implements [Engine].
func (a *apiDriver) ServerVersion(ctx context.Context) (string, error) {
	return a.serverField(ctx, "{{.Server.Version}}", func(v client.ServerVersionResult) string { return v.Version })
}

// serverField asks the daemon's version endpoint and returns one field of it, trimmed; format
// names the same question on the CLI's command line, for errors and logs.
func (a *apiDriver) serverField(ctx context.Context, format string, field func(client.ServerVersionResult) string) (string, error) {
	args := []string{"version", "--format", format}
	var out string
	err := a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		v, err := b.client.ServerVersion(ctx, client.ServerVersionOptions{})
		if err != nil {
			return apiError(args, err, nil)
		}
		out = strings.TrimSpace(field(v))
		return nil
	})
	return out, err
}
