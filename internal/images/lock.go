//go:build unix

package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPoll is how often a build waiting for another process's lock tries again.
const lockPoll = 100 * time.Millisecond

// exclusive runs fn while it holds the machine-wide build lock of tag, a flock on a file in
// the temporary directory, so that processes ensuring the same image at once (test packages
// run side by side) build it once: the others wait, then find it current. It waits for the
// lock until ctx ends, and then fails with ctx's error without running fn. The lock goes
// with the process, so a killed builder never leaves it held.
func exclusive(ctx context.Context, tag string, fn func() error) error {
	f, err := os.OpenFile(lockPath(tag), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return fmt.Errorf("open build lock of %s: %w", tag, err)
	}
	defer f.Close() // releases the lock
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("take build lock of %s: %w", tag, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for build lock of %s: %w", tag, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	return fn()
}

// lockPath is the lock file of tag: its name hashes the tag, which may hold '/' and ':'.
func lockPath(tag string) string {
	sum := sha256.Sum256([]byte(tag))
	return filepath.Join(os.TempDir(), "maf-sandbox-image-"+hex.EncodeToString(sum[:])[:16]+".lock")
}
