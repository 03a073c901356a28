//go:build unix

package flock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// A lock held through one open file is seen by every other: shared locks go together, an
// exclusive one goes with nothing, and a wait for a held lock ends with its context.
func TestLock(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name            string
		first, second   bool // exclusive?
		wantSecondLocks bool
	}{
		{name: "shared with shared", first: false, second: false, wantSecondLocks: true},
		{name: "exclusive with shared", first: true, second: false},
		{name: "shared with exclusive", first: false, second: true},
		{name: "exclusive with exclusive", first: true, second: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lock")
			if held, err := Held(path); held || err != nil {
				t.Fatalf("Held(absent) = %v, %v; want false, nil", held, err)
			}
			f, err := Lock(context.Background(), path, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			if held, err := Held(path); !held || err != nil {
				t.Fatalf("Held(locked) = %v, %v; want true, nil", held, err)
			}
			g, err := Lock(cancelled, path, tc.second)
			if tc.wantSecondLocks {
				if err != nil {
					t.Fatalf("second lock: %v", err)
				}
				g.Close()
			} else if !errors.Is(err, context.Canceled) {
				t.Fatalf("second lock while held: %v, want context.Canceled", err)
			}
			f.Close()
			if held, err := Held(path); held || err != nil {
				t.Fatalf("Held(released) = %v, %v; want false, nil", held, err)
			}
			g, err = Lock(cancelled, path, true)
			if err != nil {
				t.Fatalf("lock once released: %v", err)
			}
			g.Close()
		})
	}
}
