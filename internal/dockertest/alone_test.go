//go:build unix

package dockertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mafsandbox/engine/internal/flock"
)

// A test has the daemon alone only when every other registered user has ended or waits to be
// alone itself; while it is alone, no user joins; a user that ended leaves no files behind.
// Other processes are stood in for by files this one locks under other pids.
func TestAloneWaitsForTheDaemonsOtherUsers(t *testing.T) {
	const self, other = 1, 2
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name      string
		running   bool // the other user holds its .run
		waiting   bool // the other user has an .alone mark
		stale     bool // the other user's .run is left, unlocked
		wantAlone bool
	}{
		{name: "no other user", wantAlone: true},
		{name: "another user running", running: true},
		{name: "another user waiting to be alone", running: true, waiting: true, wantAlone: true},
		{name: "another user ended", stale: true, wantAlone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			leave, err := join(context.Background(), dir, self, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer leave()
			run := filepath.Join(dir, "2.run")
			switch {
			case tc.running:
				f, err := flock.Lock(context.Background(), run, true)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
			case tc.stale:
				if err := os.WriteFile(run, nil, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if tc.waiting {
				if err := os.WriteFile(filepath.Join(dir, "2.alone"), nil, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			release, err := alone(cancelled, dir, self)
			if !tc.wantAlone {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("alone beside a running user: %v, want to wait (context.Canceled)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("alone: %v", err)
			}
			defer release()
			if _, err := join(cancelled, dir, other+1, 0); !errors.Is(err, context.Canceled) {
				t.Fatalf("a user joined while a test is alone: %v, want to wait (context.Canceled)", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "1.alone")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the alone test's mark is left: %v", err)
			}
			if _, err := os.Stat(run); tc.stale && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("an ended user's file is left: %v", err)
			}
		})
	}
}

// Once the alone test ends, users join again, and leaving removes a user's file.
func TestJoinAfterAlone(t *testing.T) {
	dir := t.TempDir()
	release, err := alone(context.Background(), dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	release()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	leave, err := join(cancelled, dir, 3, 0)
	if err != nil {
		t.Fatalf("join after the alone test ended: %v", err)
	}
	if held, err := flock.Held(filepath.Join(dir, "3.run")); !held || err != nil {
		t.Fatalf("the joined user's file: held %v, %v; want held", held, err)
	}
	leave()
	if _, err := os.Stat(filepath.Join(dir, "3.run")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a user that left leaves its file: %v", err)
	}
}

// A child of a registered user (a test re-running its own binary) does not register and does
// not wait for the entry lock: an alone test waiting for the parent to end would wait for ever if
// the child waited for it.
func TestJoinOfARegisteredUsersChild(t *testing.T) {
	dir := t.TempDir()
	leave, err := join(context.Background(), dir, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	entry, err := flock.Lock(context.Background(), filepath.Join(dir, "entry"), true) // an alone test
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := join(cancelled, dir, 3, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a user joined while a test is alone: %v, want to wait (context.Canceled)", err)
	}
	child, err := join(cancelled, dir, 2, 1)
	if err != nil {
		t.Fatalf("the child of a registered user waited: %v", err)
	}
	defer child()
	if _, err := os.Stat(filepath.Join(dir, "2.run")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the child registered: %v", err)
	}
}
