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

// busy types an engine call of an acquire that outlived its own budget ([docker.ErrTimeout]:
// the daemon did not answer within Config.CommandTimeout, a start under a burst, say) as a
// [*sandbox.BackendUnavailableError] wrapping it, so errors.Is(err, docker.ErrTimeout) still
// holds and the NATS client is told it may retry (engine_unavailable). An acquire can be
// repeated: it adopts what the timed-out call may have left. An error that already says what
// it is (a sandbox family, or unavailable already) passes; the rest goes through unavailable.
func busy(err error) error {
	var ua *sandbox.BackendUnavailableError
	if err == nil || !errors.Is(err, docker.ErrTimeout) || errors.As(err, &ua) || sandboxFamily(err) {
		return unavailable(err)
	}
	return &sandbox.BackendUnavailableError{Backend: BackendName, Err: err,
		Reason: "the Docker daemon did not answer within the engine's command timeout (busy), retry: " + err.Error()}
}

// sandboxFamily reports whether err says a family of package sandbox.
func sandboxFamily(err error) bool {
	for _, f := range []error{sandbox.ErrNoBackend, sandbox.ErrRefused, sandbox.ErrUnsupported, sandbox.ErrInvalid,
		sandbox.ErrOS, sandbox.ErrOutput, sandbox.ErrTimeout, sandbox.ErrGone, sandbox.ErrProtocol} {
		if errors.Is(err, f) {
			return true
		}
	}
	return false
}
