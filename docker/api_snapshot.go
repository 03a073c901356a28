package docker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/client"
)

var _ Snapshotting = (*apiDriver)(nil)

// Stop implements [Snapshotting] with the container stop endpoint. A paused container is
// stopped too: the engine thaws it to deliver the signals.
func (a *apiDriver) Stop(ctx context.Context, target string, grace time.Duration) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	secs := int(grace.Round(time.Second) / time.Second)
	args := []string{"stop", "--time", strconv.Itoa(secs), target}
	return a.control(ctx, args, func(ctx context.Context, b *apiBound) error {
		if _, err := b.client.ContainerStop(ctx, target, client.ContainerStopOptions{Timeout: &secs}); err != nil {
			return apiError(args, err, nil)
		}
		return nil
	})
}
