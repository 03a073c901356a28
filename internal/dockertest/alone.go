package dockertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/internal/flock"
)

// shareWait bounds how long a test binary waits to start, or a test to have the daemon to
// itself, behind the daemon's other users.
const shareWait = 30 * time.Minute

// sharePoll is how often [Alone] looks again at the daemon's other users.
const sharePoll = 200 * time.Millisecond

// usersDir is where the test binaries using this machine's daemon register: a directory in
// the temporary directory holding the entry lock, a <pid>.run file locked by each user for
// its life, and a <pid>.alone mark for each user whose test waits to be alone.
func usersDir() string { return filepath.Join(os.TempDir(), "maf-sandbox-test-daemon") }

// Alone makes the rest of the test the daemon's only user among the test binaries that run
// [Main]: it waits until every other one has finished (or is itself waiting in Alone), and
// keeps new ones from starting their tests until the test ends. It is for a test that loads
// the daemon so heavily (hundreds of sandboxes, engines killed mid-run) that another
// package's tests beside it would time out, or it would measure their load. It calls
// [Require] first, and t.Fatal when the wait fails or exceeds 30 minutes.
func Alone(t testing.TB) {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), shareWait)
	defer cancel()
	release, err := alone(ctx, usersDir(), os.Getpid())
	if err != nil {
		t.Fatalf("have the daemon alone: %v", err)
	}
	t.Cleanup(release)
}

// join registers process pid as a user of the daemon, once no test is alone on it: under the
// shared entry lock it locks <pid>.run, which it holds until release (or the process's end). A
// process whose parent ppid is a registered user is part of its parent's use (a test that
// re-runs its own binary as a writer it kills, say) and does not register: waiting for the
// entry lock there would deadlock with an [Alone] test waiting for the parent to end.
func join(ctx context.Context, dir string, pid, ppid int) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("make %s: %w", dir, err)
	}
	if parent, err := flock.Held(filepath.Join(dir, strconv.Itoa(ppid)+".run")); err != nil || parent {
		return func() {}, err
	}
	entry, err := flock.Lock(ctx, filepath.Join(dir, "entry"), false)
	if err != nil {
		return nil, err
	}
	defer entry.Close()
	path := filepath.Join(dir, strconv.Itoa(pid)+".run")
	run, err := flock.Lock(ctx, path, true)
	if err != nil {
		return nil, err
	}
	return func() { os.Remove(path); run.Close() }, nil
}

// alone returns, holding the entry lock exclusive so that no user joins, once no other registered
// user is running: each one's <pid>.run is unlocked (it ended; its files are removed) or it
// is waiting in alone itself (its <pid>.alone mark). release gives the entry lock back.
func alone(ctx context.Context, dir string, pid int) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("make %s: %w", dir, err)
	}
	mark := filepath.Join(dir, strconv.Itoa(pid)+".alone")
	if err := os.WriteFile(mark, nil, 0o666); err != nil {
		return nil, fmt.Errorf("mark %s: %w", mark, err)
	}
	entry, err := flock.Lock(ctx, filepath.Join(dir, "entry"), true)
	os.Remove(mark) // whoever holds the entry lock is not waiting for it
	if err != nil {
		return nil, err
	}
	for {
		busy, err := othersRunning(dir, pid)
		if err != nil || busy == "" {
			if err != nil {
				entry.Close()
				return nil, err
			}
			return func() { entry.Close() }, nil
		}
		select {
		case <-ctx.Done():
			entry.Close()
			return nil, fmt.Errorf("wait for process %s to finish with the daemon: %w", busy, ctx.Err())
		case <-time.After(sharePoll):
		}
	}
}

// othersRunning returns the pid of a registered user other than pid that is running and not
// waiting in [alone], "" when there is none. It removes the files of users that ended.
func othersRunning(dir string, pid int) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("list the daemon's users: %w", err)
	}
	for _, e := range entries {
		other, ok := strings.CutSuffix(e.Name(), ".run")
		if !ok || other == strconv.Itoa(pid) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, other+".alone")); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		path := filepath.Join(dir, e.Name())
		held, err := flock.Held(path)
		if err != nil {
			return "", err
		}
		if held {
			return other, nil
		}
		os.Remove(path)
		os.Remove(filepath.Join(dir, other+".alone"))
	}
	return "", nil
}
