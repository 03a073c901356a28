package docker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A removal the daemon already has under way is asked again until it ends, and the container
// it found there is reported removed; any other answer comes back at once.
func TestRemoveForced(t *testing.T) {
	inProgress := &CommandError{Args: []string{"rm"}, ExitCode: 1, Class: errRemovalInProgress}
	refused := &CommandError{Args: []string{"rm"}, ExitCode: 1}
	cases := []struct {
		name    string
		answers []error
		want    RemoveOutcome
		wantErr error
		calls   int
	}{
		{"removed at once", []error{nil}, Removed, nil, 1},
		{"absent at once", []error{ErrNotFound}, Absent, nil, 1},
		{"removed once the daemon's own removal ended", []error{inProgress, inProgress, ErrNotFound}, Removed, nil, 3},
		{"another refusal is not asked again", []error{refused, nil}, 0, refused, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := removeForced(t.Context(), func(context.Context) (RemoveOutcome, error) {
				err := tc.answers[calls]
				calls++
				switch {
				case errors.Is(err, ErrNotFound):
					return Absent, nil
				case err != nil:
					return 0, err
				}
				return Removed, nil
			})
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || calls != tc.calls {
				t.Fatalf("got %v, %v after %d calls; want %v, %v after %d", got, err, calls, tc.want, tc.wantErr, tc.calls)
			}
		})
	}
}

// A forced removal the daemon could not finish is asked again, a bounded number of times.
func TestRemoveForcedIncomplete(t *testing.T) {
	incomplete := &CommandError{Args: []string{"rm"}, ExitCode: 500, Class: errRemovalIncomplete}
	cases := []struct {
		name    string
		answers int // incomplete answers before the removal goes through (-1: never)
		want    RemoveOutcome
		wantErr error
		calls   int
	}{
		{"removed on the third ask", 2, Removed, nil, 3},
		{"given up after the bound", -1, 0, errRemovalIncomplete, removeIncompleteTries},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := removeForced(t.Context(), func(context.Context) (RemoveOutcome, error) {
				calls++
				if tc.answers < 0 || calls <= tc.answers {
					return 0, incomplete
				}
				return Removed, nil
			})
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || calls != tc.calls {
				t.Fatalf("got %v, %v after %d calls; want %v, %v after %d", got, err, calls, tc.want, tc.wantErr, tc.calls)
			}
		})
	}
}

// The driver classifies a daemon's internal error on a forced removal (fuse-overlayfs
// failing to release the root filesystem, as 20.10 answers it) by its status alone and asks
// again until the removal goes through; a removal the daemon refuses otherwise, and an
// internal error on a network's removal, are not asked again.
func TestRemoveRetriesAnIncompleteRemoval(t *testing.T) {
	const fuse = `container 0123abcd: driver "fuse-overlayfs" failed to remove root filesystem: ` +
		`unlinkat /var/lib/docker/fuse-overlayfs/0123abcd/merged: directory not empty`
	cases := []struct {
		name      string
		path      string // the request the daemon fails
		failures  int
		status    int
		remove    func(a *Engine) (RemoveOutcome, error)
		want      RemoveOutcome
		wantErr   bool
		wantCalls int64
	}{
		{"fuse-overlayfs twice, then removed", "/containers/c1", 2, http.StatusInternalServerError,
			func(a *Engine) (RemoveOutcome, error) { return a.Remove(t.Context(), "c1") }, Removed, false, 3},
		{"a refusal of another class", "/containers/c1", 1, http.StatusBadRequest,
			func(a *Engine) (RemoveOutcome, error) { return a.Remove(t.Context(), "c1") }, 0, true, 1},
		{"an internal error removing a network", "/networks/n1", 1, http.StatusInternalServerError,
			func(a *Engine) (RemoveOutcome, error) { return a.NetworkRemove(t.Context(), "n1") }, 0, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, host := unixDaemon(t)
			var calls atomic.Int64
			d.handle = func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodDelete || !strings.HasSuffix(r.URL.Path, tc.path) {
					return false
				}
				if calls.Add(1) <= int64(tc.failures) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					_ = json.NewEncoder(w).Encode(map[string]string{"message": fuse})
					return true
				}
				w.WriteHeader(http.StatusNoContent)
				return true
			}
			t.Setenv("DOCKER_HOST", host)
			t.Setenv("DOCKER_CONTEXT", "")
			a, err := NewEngine(Config{DockerPath: "/nonexistent/docker"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.remove(a)
			if (err != nil) != tc.wantErr || got != tc.want || calls.Load() != tc.wantCalls {
				t.Fatalf("got %v, %v after %d DELETEs; want %v (error %v) after %d", got, err, calls.Load(), tc.want, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
