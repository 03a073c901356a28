package docker

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RemoveSettled runs remove, a forced removal of one container, and asks again while the
// daemon answers that a removal of it is already in progress: a container the daemon removes itself when it exits
// (an observer) is refused a second removal until the first ends, and then it is [Absent].
// It stops at ctx's end or at any other answer.
func RemoveSettled(ctx context.Context, remove func(context.Context) (RemoveOutcome, error)) (RemoveOutcome, error) {
	bo := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0)), ctx)
	return backoff.RetryWithData(func() (RemoveOutcome, error) {
		out, err := remove(ctx)
		if err != nil && !errors.Is(err, errRemovalInProgress) {
			return out, backoff.Permanent(err)
		}
		return out, err
	}, bo)
}

// removeForced is a forced removal that waits out one already under way: the daemon refuses a
// second removal while the first works, and the container is then gone, so it reports
// [Removed] (it was there, and it is gone) where the retry found it [Absent].
func removeForced(ctx context.Context, remove func(context.Context) (RemoveOutcome, error)) (RemoveOutcome, error) {
	waited := false
	out, err := RemoveSettled(ctx, func(ctx context.Context) (RemoveOutcome, error) {
		out, err := remove(ctx)
		if errors.Is(err, errRemovalInProgress) {
			waited = true
		}
		return out, err
	})
	if err == nil && waited && out == Absent {
		out = Removed
	}
	return out, err
}
