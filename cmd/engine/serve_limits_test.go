package main

import (
	"testing"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/service"
	"github.com/mafsandbox/engine/telemetry"
)

// TestServeLimitFlags: the bounds on calls in flight and on the metrics' caller-chosen labels
// have their defaults, take flags and the environment, and refuse what is out of range.
func TestServeLimitFlags(t *testing.T) {
	cases := []struct {
		name                              string
		args                              []string
		env                               map[string]string
		wantErr                           bool
		maxInFlight, perAccount, labelCap int
		kinds                             string
	}{
		{name: "defaults", maxInFlight: service.DefaultMaxInFlight, labelCap: telemetry.DefaultLabelCap},
		{name: "flags", args: []string{"--max-in-flight", "64", "--max-in-flight-per-account", "8", "--metrics-label-cap", "0", "--metrics-kinds", "python, shell"},
			maxInFlight: 64, perAccount: 8, labelCap: 0, kinds: "python, shell"},
		{name: "environment", env: map[string]string{"MAF_SANDBOX_MAX_IN_FLIGHT_PER_ACCOUNT": "3", "MAF_SANDBOX_METRICS_LABEL_CAP": "5"},
			maxInFlight: service.DefaultMaxInFlight, perAccount: 3, labelCap: 5},
		{name: "no calls at all", args: []string{"--max-in-flight", "0"}, wantErr: true},
		{name: "negative per account", args: []string{"--max-in-flight-per-account", "-1"}, wantErr: true},
		{name: "negative label cap", args: []string{"--metrics-label-cap", "-2"}, wantErr: true},
		{name: "not a number in the environment", env: map[string]string{"MAF_SANDBOX_MAX_IN_FLIGHT": "many"}, wantErr: true},
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
			if l.maxInFlight != tc.maxInFlight || l.perAccount != tc.perAccount || l.labelCap != tc.labelCap || l.kinds != tc.kinds {
				t.Fatalf("limits %+v, want %d %d %d %q", l, tc.maxInFlight, tc.perAccount, tc.labelCap, tc.kinds)
			}
			if n := len(l.serviceOptions()); n != 1+min(tc.perAccount, 1) {
				t.Errorf("%d service options", n)
			}
		})
	}
}
