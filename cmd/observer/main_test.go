package main

import (
	"errors"
	"testing"

	"github.com/mafsandbox/engine/internal/observation"
)

func TestRunRefusesUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"no verb", nil},
		{"another verb", []string{"watch"}},
		{"an argument", []string{"measure", "extra"}},
		{"an unknown flag", []string{"measure", "-follow"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args)
			if !errors.Is(err, observation.ErrUsage) || observation.ExitCode(err) != observation.ExitUsage {
				t.Fatalf("run(%q) = %v, want a usage error (exit %d)", tc.args, err, observation.ExitUsage)
			}
		})
	}
	if err := run([]string{"measure", "-proc", t.TempDir()}); err == nil || observation.ExitCode(err) != observation.ExitUnreadable {
		t.Fatalf("a proc with no workload gave %v, want an unreadable measurement", err)
	}
}
