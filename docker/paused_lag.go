package docker

import (
	"context"
	"errors"
	"time"
)

// Docker 20.10 applies containerd's events late: the "paused" of a freeze already thawed (or
// of a pause the freezer gave up on and that was lifted) can land after its "resumed", and
// until the matching event lands the daemon reports a running container paused, refusing an
// exec or a pause of it. A call so refused is asked again after 20, 40, 80, 160 and 320 ms;
// a pause someone really holds is still refused after the last wait.
const (
	pausedFirstWait = 20 * time.Millisecond
	pausedLastWait  = 320 * time.Millisecond
)

// AskWhilePaused calls call, and again after each of the waits above while it fails with
// [ErrPaused] and more (nil: always) holds. It returns call's last error; when ctx ends the
// waits stop there, and that error is returned as it was.
func AskWhilePaused(ctx context.Context, call func() error, more func() bool) error {
	err := call()
	for wait := pausedFirstWait; errors.Is(err, ErrPaused) && (more == nil || more()) && wait <= pausedLastWait; wait *= 2 {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		err = call()
	}
	return err
}
