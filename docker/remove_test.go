package docker

import (
	"context"
	"errors"
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
