package main

import (
	"testing"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/telemetry"
)

// TestServeLimitFlags: the bounds on the metrics' caller-chosen labels have their defaults,
// take flags and the environment, and refuse what is out of range.
func TestServeLimitFlags(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		wantErr  bool
		labelCap int
		kinds    string
	}{
		{name: "defaults", labelCap: telemetry.DefaultLabelCap},
		{name: "flags", args: []string{"--metrics-label-cap", "0", "--metrics-kinds", "python, shell"}, labelCap: 0, kinds: "python, shell"},
		{name: "environment", env: map[string]string{"MAF_SANDBOX_METRICS_LABEL_CAP": "5"}, labelCap: 5},
		{name: "negative label cap", args: []string{"--metrics-label-cap", "-2"}, wantErr: true},
		{name: "not a number in the environment", env: map[string]string{"MAF_SANDBOX_METRICS_LABEL_CAP": "many"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			v := &serveVerb{labels: settings.Labels{}}
			err := v.parse(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parse %q with %v: no error", tc.args, tc.env)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			l := v.limits
			if l.labelCap != tc.labelCap || l.kinds != tc.kinds {
				t.Fatalf("limits %+v, want %d %q", l, tc.labelCap, tc.kinds)
			}
		})
	}
}
