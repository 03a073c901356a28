package dockertest

import (
	"context"
	"errors"
	"testing"
)

func TestDockerErr(t *testing.T) {
	Require(t)
	cases := []struct {
		name       string
		args       []string
		cancelled  bool
		wantOut    bool  // stdout not empty
		wantStderr bool  // stderr not empty
		wantFail   bool  // an error at all
		wantErr    error // an error matching this
	}{
		{name: "server version", args: []string{"version", "--format", "{{.Server.Version}}"}, wantOut: true},
		{name: "missing image", args: []string{"image", "inspect", "maf-sandbox-test/absent:none"}, wantStderr: true, wantFail: true},
		{name: "cancelled", args: []string{"version"}, cancelled: true, wantFail: true, wantErr: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			stdout, stderr, err := DockerErr(ctx, tc.args...)
			if (err != nil) != tc.wantFail {
				t.Fatalf("DockerErr() error = %v, wantFail %v", err, tc.wantFail)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("DockerErr() error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantOut && len(stdout) == 0 {
				t.Fatal("DockerErr() stdout is empty")
			}
			if tc.wantStderr && len(stderr) == 0 {
				t.Fatal("DockerErr() stderr is empty")
			}
		})
	}
}

func TestDockerFailureIsFatal(t *testing.T) {
	Require(t)
	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { Docker(tb, "image", "inspect", "maf-sandbox-test/absent:none") })
	if r.outcome != "fatal" {
		t.Fatalf("Docker on a failing command: outcome %q, want fatal", r.outcome)
	}
}
