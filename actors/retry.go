package actors

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/mafsandbox/engine/docker"
)

// retrying wraps the driver so that read-only questions survive a transient failure (a
// daemon restarting, a call that outlived its budget) while permanent answers — absent,
// refused, invalid — come back at once. Calls that change the container are not retried
// here: a create or copy that timed out may have landed, and repeating it is the caller's
// decision. Every other member of [docker.Driver] passes through unchanged; the raw driver,
// for a caller that must not retry (the reaper, the health check), is its Driver field.
type retrying struct {
	docker.Driver
}

var _ docker.Driver = retrying{}

// transient is the one classifier: only an unreachable daemon or a call that ran out of its
// own budget is worth asking again.
func transient(err error) bool {
	return errors.Is(err, docker.ErrTimeout) || (errors.Is(err, docker.ErrUnreachable) && !errors.Is(err, docker.ErrClientNotFound))
}

func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	bo := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond), backoff.WithMaxInterval(time.Second)), 2), ctx)
	return backoff.RetryWithData(func() (T, error) {
		v, err := fn()
		if err != nil && !transient(err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, bo)
}

func (r retrying) Inspect(ctx context.Context, target string) (docker.ContainerInfo, error) {
	return retry(ctx, func() (docker.ContainerInfo, error) { return r.Driver.Inspect(ctx, target) })
}

func (r retrying) ImageExists(ctx context.Context, image string) (bool, error) {
	return retry(ctx, func() (bool, error) { return r.Driver.ImageExists(ctx, image) })
}

func (r retrying) ImageEntrypoint(ctx context.Context, image string) ([]string, bool, error) {
	type answer struct {
		ep      []string
		present bool
	}
	a, err := retry(ctx, func() (answer, error) {
		ep, ok, err := r.Driver.ImageEntrypoint(ctx, image)
		return answer{ep, ok}, err
	})
	return a.ep, a.present, err
}

func (r retrying) ServerOS(ctx context.Context) (string, error) {
	return retry(ctx, func() (string, error) { return r.Driver.ServerOS(ctx) })
}

func (r retrying) ServerVersion(ctx context.Context) (string, error) {
	return retry(ctx, func() (string, error) { return r.Driver.ServerVersion(ctx) })
}

func (r retrying) ListNames(ctx context.Context, labels map[string]string, name string) ([]string, error) {
	return retry(ctx, func() ([]string, error) { return r.Driver.ListNames(ctx, labels, name) })
}

func (r retrying) Stat(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	return retry(ctx, func() (*docker.Entry, error) { return r.Driver.Stat(ctx, target, guestPath) })
}

// NetworkInspect is the one read-only network question (the allowlist topology's).
func (r retrying) NetworkInspect(ctx context.Context, ref string) (docker.NetworkInfo, error) {
	return retry(ctx, func() (docker.NetworkInfo, error) { return r.Driver.NetworkInspect(ctx, ref) })
}

// StatType answers from the engine's cheaper kind-only stat; the entry's owner is unknown (-1).
func (r retrying) StatType(ctx context.Context, target, guestPath string) (*docker.Entry, error) {
	return retry(ctx, func() (*docker.Entry, error) { return r.Driver.StatType(ctx, target, guestPath) })
}
