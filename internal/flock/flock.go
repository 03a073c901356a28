//go:build unix

package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// poll is how often a wait for a lock held elsewhere tries again.
const poll = 100 * time.Millisecond

// Lock opens path (creating it) and locks it, exclusive or shared, waiting while another open
// file holds a conflicting lock until ctx ends; then it fails with ctx's error. Closing the
// returned file releases the lock. Locking a file the caller already holds locked through
// another open file waits too: each open file is a holder of its own.
func Lock(ctx context.Context, path string, exclusive bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		ok, err := try(f, exclusive)
		if ok || err != nil {
			if err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// Held reports whether some open file holds a lock on path that an exclusive lock would
// conflict with. A missing file is not held.
func Held(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open lock %s: %w", path, err)
	}
	defer f.Close() // releases the lock try took
	ok, err := try(f, true)
	return !ok, err
}

// try locks f without waiting; false, nil when another open file holds a conflicting lock.
func try(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
}
