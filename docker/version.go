package docker

import (
	"context"
	"strings"

	"github.com/moby/moby/client"
)

// ServerOS implements [Containers].
func (a *Engine) ServerOS(ctx context.Context) (string, error) {
	name, err := a.serverField(ctx, "{{.Server.Os}}", func(v client.ServerVersionResult) string { return v.Os })
	return strings.ToLower(name), err
}

// ServerVersion implements [Containers].
func (a *Engine) ServerVersion(ctx context.Context) (string, error) {
	return a.serverField(ctx, "{{.Server.Version}}", func(v client.ServerVersionResult) string { return v.Version })
}

// serverField asks the daemon's version endpoint and returns one field of it, trimmed; format
// names the same question as `docker version --format`, for errors and logs.
func (a *Engine) serverField(ctx context.Context, format string, field func(client.ServerVersionResult) string) (string, error) {
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
