package docker

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if c.DockerPath != "docker" || c.OutboundNetwork != "bridge" || c.CommandTimeout != 60*time.Second ||
		c.ImagePullTimeout != 600*time.Second || c.PidsLimit != 512 || c.CapDropAll || c.Memory != "" ||
		c.CPUs != nil || c.EgressProxyImage != "" {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
}

func TestConfigWithDefaultsCopies(t *testing.T) {
	cpus := 1.5
	in := Config{CPUs: &cpus, Labels: map[string]string{"a": "1"}, PidsLimit: 7}
	got := in.withDefaults()
	cpus = 9
	in.Labels["a"] = "2"
	if *got.CPUs != 1.5 || got.Labels["a"] != "1" || got.PidsLimit != 7 {
		t.Fatalf("withDefaults shares state with its input: %+v", got)
	}
}

func TestConfigValidate(t *testing.T) {
	nan, zero := math.NaN(), 0.0
	cases := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"defaults", DefaultConfig(), nil},
		{"session label", Config{Labels: map[string]string{"maf-sandbox-test.session": "abc"}}, nil},
		{"reserved label", Config{Labels: map[string]string{"maf-sandbox.scope": "x"}}, ErrInvalid},
		{"negative timeout", Config{CommandTimeout: -time.Second}, ErrInvalid},
		{"NaN cpus", Config{CPUs: &nan}, ErrInvalid},
		{"zero cpus", Config{CPUs: &zero}, ErrInvalid},
		{"private block", Config{EgressPrivateCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}}, nil},
		{"private block of everything", Config{EgressPrivateCIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, ErrInvalid},
		{"zero private block", Config{EgressPrivateCIDRs: []netip.Prefix{{}}}, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.withDefaults().validate()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("validate() = %v, want %v", err, tc.wantErr)
			}
			_, err = NewEngine(tc.cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewEngine() = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestConfigWorkloadOpts(t *testing.T) {
	cpus := 0.5
	spec := NewCreateSpec("N", "img", Config{CapDropAll: true, Memory: "1g", CPUs: &cpus}.WorkloadOpts()...)
	if !spec.NoNewPrivileges || spec.PidsLimit != 512 || !spec.CapDropAll || spec.Memory != "1g" || *spec.CPUs != 0.5 {
		t.Fatalf("WorkloadOpts gave %+v", spec)
	}
}
