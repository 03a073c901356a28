package actors

import (
	"context"
	"errors"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/sandbox"
)

// CheckHealth makes one round trip to the daemon (its OS, with no retry), bounded by the
// command timeout: nil when it answers, a [*sandbox.BackendUnavailableError] when it cannot
// be reached, else the engine's error.
func (b *Backend) CheckHealth(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.commandTimeout())
	defer cancel()
	_, err := b.engine.Driver.ServerOS(ctx) // the raw driver: a health check never retries
	return unavailable(err)
}

// unavailable types an error that says the daemon cannot be reached (or its client cannot
// start) as a [*sandbox.BackendUnavailableError] wrapping it; any other error, nil included,
// passes unchanged.
func unavailable(err error) error {
	if err == nil || !errors.Is(err, docker.ErrUnreachable) {
		return err
	}
	reason := "the Docker daemon cannot be reached"
	if errors.Is(err, docker.ErrClientNotFound) {
		reason = "the docker client binary cannot be found"
	}
	return &sandbox.BackendUnavailableError{Backend: BackendName, Reason: reason, Err: err}
}
