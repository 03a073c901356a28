package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/mafsandbox/engine/internal/flock"
)

// exclusive runs fn while it holds the machine-wide build lock of tag ([flock.Lock] on a file
// in the temporary directory), so that processes ensuring the same image at once (test
// packages run side by side) build it once: the others wait, then find it current. It waits
// for the lock until ctx ends, and then fails with ctx's error without running fn.
func exclusive(ctx context.Context, tag string, fn func() error) error {
	f, err := flock.Lock(ctx, lockPath(tag), true)
	if err != nil {
		return err
	}
	defer f.Close() // releases the lock
	return fn()
}

// lockPath is the lock file of tag: its name hashes the tag, which may hold '/' and ':'.
func lockPath(tag string) string {
	sum := sha256.Sum256([]byte(tag))
	return filepath.Join(os.TempDir(), "maf-sandbox-image-"+hex.EncodeToString(sum[:])[:16]+".lock")
}
