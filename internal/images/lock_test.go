//go:build unix

package images

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/mafsandbox/engine/internal/flock"
)

// tryLock reports whether the build lock of tag is free, as another process would see it.
func tryLock(t *testing.T, tag string) bool {
	t.Helper()
	held, err := flock.Held(lockPath(tag))
	if err != nil {
		t.Fatal(err)
	}
	return !held
}

// While one ensure of a tag builds, every other waits for it (and gives up when its context
// ends, without building); an ensure of another tag does not wait. The lock is free again
// once the build returns, whatever it returned.
func TestExclusiveHoldsTheTagsBuildLock(t *testing.T) {
	tag := "maf-sandbox-test/lock:" + strconv.Itoa(os.Getpid())
	other := tag + "-other"
	t.Cleanup(func() { os.Remove(lockPath(tag)); os.Remove(lockPath(other)) })
	failed := errors.New("the build failed")
	err := exclusive(context.Background(), tag, func() error {
		if tryLock(t, tag) {
			t.Error("the lock is free while a build holds it")
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		ran := false
		if err := exclusive(cancelled, tag, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Errorf("a second build of the tag with its context ended: error %v, ran %v; want context.Canceled, not run", err, ran)
		}
		if err := exclusive(context.Background(), other, func() error { return nil }); err != nil {
			t.Errorf("a build of another tag: %v", err)
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("exclusive returned %v, want the build's own error", err)
	}
	if !tryLock(t, tag) {
		t.Fatal("the lock is still held after the build returned")
	}
}
