package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestDriverRefused: --driver, in any spelling, and MAF_SANDBOX_DRIVER are refused by the verbs
// that drive the daemon, before any other work, with a message that says how the engine
// reaches it; other verbs and a "--driver" after "--" are not concerned.
func TestDriverRefused(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	cliEnv := func(k string) (string, bool) { return "cli", k == envDriver }
	cases := []struct {
		name    string
		verb    string
		args    []string
		env     func(string) (string, bool)
		refused bool
	}{
		{"serve --driver cli", "serve", []string{"--listen", "127.0.0.1:0", "--driver", "cli"}, noEnv, true},
		{"serve --driver=cli", "serve", []string{"--driver=cli"}, noEnv, true},
		{"reap -driver api", "reap", []string{"-driver", "api", "--older-than", "1h"}, noEnv, true},
		{"bench --driver cli", "bench", []string{"--driver", "cli"}, noEnv, true},
		{"serve with the variable", "serve", nil, cliEnv, true},
		{"reap with the variable", "reap", []string{"--older-than", "1h"}, cliEnv, true},
		{"serve without either", "serve", []string{"--listen", "127.0.0.1:0"}, noEnv, false},
		{"the variable empty", "serve", nil, func(string) (string, bool) { return "", true }, false},
		{"after --", "bench", []string{"--", "--driver", "cli"}, noEnv, false},
		{"a verb that never took it", "console", nil, cliEnv, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := refuseDriver(tc.verb, tc.args, tc.env)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refuseDriver = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, errDriverGone) {
				t.Fatalf("refuseDriver = %v, want errDriverGone", err)
			}
			for _, want := range []string{"Engine API", "ssh://", "tcp://", "unix"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("message %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestDriverFlagExitsWithTheReplacement: "engine serve --driver cli" exits 1 before it
// serves anything, printing what replaced the driver.
func TestDriverFlagExitsWithTheReplacement(t *testing.T) {
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--driver", "cli"}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--driver cli is refused") || !strings.Contains(stderr.String(), "dial-stdio") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
