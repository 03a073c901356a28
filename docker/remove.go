package docker

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// removeIncompleteTries bounds the forced removals of one container that the daemon answers
// with [errRemovalIncomplete]: with the backoff below they span about 2.5 s, where the
// storage driver settles in milliseconds; a daemon failing past that is failing for another
// reason, and its answer is returned.
const removeIncompleteTries = 8

// removeForced runs remove, a forced removal of one container, and asks again while the
// daemon answers that a removal of it is already in progress: the daemon refuses a second
// removal while the first works (its own auto-removal of an observer that just exited, or
// another caller's rm), and the container is gone once it ends. It also asks again, up to
// [removeIncompleteTries] times in all, while the daemon answers that it could not finish the
// removal ([errRemovalIncomplete]). A removal that waited reports [Removed] (it was there, and
// it is gone), not the [Absent] the last ask found. It stops at ctx's end or at any other
// answer.
func removeForced(ctx context.Context, remove func(context.Context) (RemoveOutcome, error)) (RemoveOutcome, error) {
	bo := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0)), ctx)
	waited, incomplete := false, 0
	out, err := backoff.RetryWithData(func() (RemoveOutcome, error) {
		out, err := remove(ctx)
		switch {
		case errors.Is(err, errRemovalInProgress):
			waited = true
			return out, err
		case errors.Is(err, errRemovalIncomplete):
			if incomplete++; incomplete >= removeIncompleteTries {
				return out, backoff.Permanent(err)
			}
			waited = true
			return out, err
		case err != nil:
			return out, backoff.Permanent(err)
		}
		return out, nil
	}, bo)
	if err == nil && waited && out == Absent {
		out = Removed
	}
	return out, err
}
