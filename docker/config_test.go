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
		c.ImagePullTimeout != 600*time.Second || c.PidsLimit != 512 || c.CapAdd != nil || c.Memory != "" ||
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
		{"memory", Config{Memory: "512m"}, nil},
		{"unreadable memory", Config{Memory: "lots"}, ErrInvalid},
		{"zero memory", Config{Memory: "0"}, ErrInvalid},
		{"every addable capability", Config{CapAdd: AddableCapabilities()}, nil},
		{"a capability spelt as the kernel does", Config{CapAdd: []string{"cap_kill"}}, nil},
		{"a capability outside the allow-list", Config{CapAdd: []string{"NET_RAW"}}, ErrInvalid},
		{"ALL given back", Config{CapAdd: []string{"ALL"}}, ErrInvalid},
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
	spec := NewCreateSpec("N", "img", Config{Memory: "1g", CPUs: &cpus}.WorkloadOpts()...)
	if !spec.NoNewPrivileges || spec.PidsLimit != 512 || !spec.CapDropAll || spec.CapAdd != nil || spec.Memory != "1g" || *spec.CPUs != 0.5 {
		t.Fatalf("WorkloadOpts gave %+v", spec)
	}
	// Every capability is dropped whatever the configuration says: there is no field that
	// keeps Docker's default set.
	if spec := NewCreateSpec("N", "img", Config{}.WorkloadOpts()...); !spec.CapDropAll {
		t.Fatalf("the zero configuration keeps Docker's default capabilities: %+v", spec)
	}
}

func TestConfigBounds(t *testing.T) {
	cpus := 1.5
	cases := []struct {
		name string
		cfg  Config
		want Bounds
	}{
		{"defaults: pids only", Config{}, Bounds{Pids: 512}},
		{"every bound", Config{Memory: "2g", CPUs: &cpus, PidsLimit: 100}, Bounds{MemoryBytes: 2 << 30, CPUs: 1.5, Pids: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.Bounds(); got != tc.want {
				t.Fatalf("Bounds() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
